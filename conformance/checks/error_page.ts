import type { Landing } from '../http/user_agent.ts';
import { forms, pageTitle, visibleText } from '../http/html.ts';

/**
 * Where the suite waits for a screenshot of an error page, this runner reads the page: the OP must
 * not redirect, must answer with a page (not a server error, not a login or consent form), and the
 * page's text must name the problem the suite describes, as a reviewer would look for.
 */
export function errorPageProblem(landing: Landing, topic: RegExp, description: string): string | undefined {
  if (landing.kind === 'redirect') return `the OP redirected to ${landing.url.origin}${landing.url.pathname} instead of showing an error page (${description})`;
  const { response } = landing;
  if (response.status >= 500) return `the OP answered ${response.status}, a server error, instead of an error page (${description})`;
  const interactive = forms(response.text).some((form) => form.fields.some((field) => field.type === 'password' || field.name === 'decision'));
  if (interactive) return `the OP showed its login or consent form instead of an error page (${description})`;
  const text = visibleText(response.text);
  if (!topic.test(text)) return `the error page does not say what is wrong (${description}); it reads: ${JSON.stringify(text.slice(0, 300))}`;
  return undefined;
}

/** A line for the report: which page the runner looked at. */
export function pageSummary(landing: Landing): string {
  if (landing.kind === 'redirect') return `redirect to ${landing.url.href}`;
  const title = pageTitle(landing.response.text);
  return `${landing.response.status} page${title ? ` "${title}"` : ''}: ${visibleText(landing.response.text).slice(0, 160)}`;
}
