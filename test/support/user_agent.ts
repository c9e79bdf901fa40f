/**
 * A minimal browser over fetch: keeps cookies, follows redirects by hand, fills the login and
 * consent forms the server renders. For flows whose subject is the token endpoint; the pages
 * themselves are tested in a real browser (test/authorize.browser.test.ts).
 */
export class UserAgent {
  readonly #cookies = new Map<string, string>();
  readonly #headers: Readonly<Record<string, string>>;

  /** `headers` go with every request (an `x-forwarded-for` to speak from an address of its own). */
  constructor(headers: Record<string, string> = {}) {
    this.#headers = headers;
  }

  /** The values of the cookies it holds (session ids and the like, to look for in the store). */
  cookieValues(): string[] {
    return [...this.#cookies.values()];
  }

  /** `init.headers` go with this request only, over the agent's own (a form sent as from another site). */
  async request(url: string, init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {}): Promise<Response> {
    const headers: Record<string, string> = { ...this.#headers, ...init.headers, cookie: [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; ') };
    let body: string | undefined;
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    const response = await fetch(url, { method: init.method ?? (body ? 'POST' : 'GET'), headers, body, redirect: 'manual' });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (/expires=Thu, 01 Jan 1970/i.test(cookie) || value === '') this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
    return response;
  }

  /** Follows redirects on this server until one leaves it (returned) or a page is shown (returned). */
  async follow(url: string, origin: string): Promise<{ url: string; response: Response }> {
    let current = url;
    for (let hops = 0; hops < 10; hops += 1) {
      const response = await this.request(current);
      const location = response.headers.get('location');
      if (response.status < 300 || response.status >= 400 || !location) return { url: current, response };
      current = new URL(location, current).href;
      if (!current.startsWith(origin)) return { url: current, response };
    }
    throw new Error('too many redirects');
  }
}

export interface Decision {
  email: string;
  password: string;
  /** The workspace to pick on the consent page (defaults to the first offered). */
  workspace?: string;
  decision?: 'allow' | 'deny';
  /** Sees each consent page's HTML before it is answered. */
  onConsent?: (html: string) => void;
}

/** The value a page's form field `name` is filled with. */
export const field = (html: string, name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1];
/** Where a page's form posts. */
export const formAction = (html: string) => /<form method="post" action="([^"]+)"/.exec(html)?.[1];

/**
 * Drives /oauth/authorize to its final redirect: logs in if the login page shows, answers the
 * consent page if it shows. Returns the URL the server finally sends the browser to.
 */
export async function authorize(agent: UserAgent, authorizationUrl: string, origin: string, decision: Decision): Promise<URL> {
  let { url, response } = await agent.follow(authorizationUrl, origin);
  const seen: string[] = [];
  for (let step = 0; step < 4; step += 1) {
    seen.push(`${response.status} ${url}`);
    if (!url.startsWith(origin)) return new URL(url);
    const html = await response.text();
    const action = formAction(html);
    if (!action) throw new Error(`expected a login or consent page at ${url}, got ${response.status}:\n${html.slice(0, 500)}`);
    const csrf = field(html, 'csrf')!;
    if (!action.endsWith('/login')) decision.onConsent?.(html);
    const form: Record<string, string> = action.endsWith('/login')
      ? { csrf, email: decision.email, password: decision.password }
      : { csrf, decision: decision.decision ?? 'allow', workspace: decision.workspace ?? field(html, 'workspace') ?? /name="workspace" value="([^"]*)"/.exec(html)![1]! };
    const posted = await agent.request(new URL(action, origin).href, { form });
    const location = posted.headers.get('location');
    if (!location) throw new Error(`form post to ${action} answered ${posted.status}: ${await posted.text()}`);
    ({ url, response } = await agent.follow(new URL(location, origin).href, origin));
  }
  throw new Error(`authorization did not finish: ${seen.join(' | ')}`);
}
