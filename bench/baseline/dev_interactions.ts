import type { UserAgent } from '../../test/support/user_agent.ts';

/**
 * Drives the engine's built-in development login and consent pages (`devInteractions`, the
 * baseline's only way to mint codes over HTTP) to the final redirect, like test/helpers'
 * `authorize` does for the service's own pages. Any login name is accepted there.
 */
export async function authorizeWithDevInteractions(agent: UserAgent, authorizationUrl: string, origin: string, login: string): Promise<URL> {
  let { url, response } = await agent.follow(authorizationUrl, origin);
  for (let step = 0; step < 4; step += 1) {
    if (!url.startsWith(origin)) return new URL(url);
    const html = await response.text();
    const action = /<form[^>]* action="([^"]+)"[^>]* method="post"/.exec(html)?.[1];
    const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
    if (!action || !prompt) throw new Error(`expected the engine's login or consent page at ${url}, got ${response.status}:\n${html.slice(0, 500)}`);
    const form: Record<string, string> = prompt === 'login' ? { prompt, login, password: 'any' } : { prompt };
    const posted = await agent.request(new URL(action, origin).href, { form });
    const location = posted.headers.get('location');
    if (!location) throw new Error(`form post to ${action} answered ${posted.status}: ${await posted.text()}`);
    ({ url, response } = await agent.follow(new URL(location, origin).href, origin));
  }
  throw new Error('authorization did not finish');
}
