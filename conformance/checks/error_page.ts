import type { Landing } from '../http/user_agent.ts';
import { pageTitle, visibleText } from '../http/html.ts';

/**
 * Where the suite waits for a screenshot of an error page, this runner reads the page: it must be
 * an HTML page the OP serves with a 4xx status (not a redirect to the client, not a login form)
 * whose text names the problem the suite describes.
 */
export function errorPageProblem(landing: Landing, topic: RegExp, description: string): string | undefined {
  if (landing.kind === 'redirect') return `the OP redirected to ${landing.url.origin}${landing.url.pathname} instead of showing an error page (${description})`;
  const { response } = landing;
  if (response.status < 400 || response.status >= 500) return `the OP answered ${response.status}, not an error page (4xx) (${description})`;
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
