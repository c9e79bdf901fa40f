import type { HttpClient, HttpResponse } from './http_client.ts';

/**
 * A browser reduced to what an authorization request needs: it keeps the OP's cookies and
 * follows the OP's redirects by hand, so it can stop where the OP hands the browser back to the
 * client (the redirect_uri) and never contacts the client's host. Each module has its own, like
 * the suite's instruction to start with no cookies from the OP.
 */
export class UserAgent {
  readonly #cookies = new Map<string, string>();
  readonly http: HttpClient;

  constructor(http: HttpClient) {
    this.http = http;
  }

  async request(url: string, init: { method?: string; form?: Record<string, string> } = {}): Promise<HttpResponse> {
    const headers: Record<string, string> = { accept: 'text/html,application/xhtml+xml' };
    const cookie = [...this.#cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    if (cookie) headers.cookie = cookie;
    let body: string | undefined;
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    const response = await this.http.send({ method: init.method ?? (body === undefined ? 'GET' : 'POST'), url, headers, body });
    this.#remember(response.headers.getSetCookie());
    return response;
  }

  #remember(setCookies: string[]): void {
    for (const setCookie of setCookies) {
      const [pair = ''] = setCookie.split(';');
      const eq = pair.indexOf('=');
      if (eq < 1) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = /expires=Thu, 01 Jan 1970/i.test(setCookie) || /max-age=0\b/i.test(setCookie);
      if (expired || value === '') this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }
}

/** Where a chain of redirects ended: back at the client, or on a page the OP shows. */
export type Landing =
  /** Sent back to the client: by a redirect (the answer in the URL), or by a form posted there (`posted`: response_mode=form_post). */
  | { kind: 'redirect'; url: URL; posted?: Record<string, string> }
  | { kind: 'page'; url: string; response: HttpResponse };

const MAX_REDIRECTS = 15;

/**
 * Follows the OP's redirects from a first response. A redirect that leaves the OP's origin is the
 * OP answering the client: it is returned, not followed.
 */
export async function followRedirects(agent: UserAgent, first: HttpResponse, opOrigin: string): Promise<Landing> {
  let response = first;
  for (let hop = 0; hop < MAX_REDIRECTS; hop += 1) {
    const location = response.headers.get('location');
    if (response.status < 300 || response.status >= 400 || !location) return { kind: 'page', url: response.url, response };
    const next = new URL(location, response.url);
    if (next.origin !== opOrigin) return { kind: 'redirect', url: next };
    response = await agent.request(next.href);
  }
  throw new Error(`more than ${MAX_REDIRECTS} redirects within the OP`);
}
