import { sqliteFile } from '../../adapters/index.ts';
import { api, clientCredentialsToken, createApiKey, userAccessToken } from '../support/data_api.ts';
import { Prober } from './checks.ts';
import { StoreWatch } from './store_snapshot.ts';
import { closeConnections } from './http.ts';
import { codeRequest, REDIRECT_URI, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * The world the fuzz tests run in: one real server on a real SQLite file, a user in a workspace,
 * clients of every kind, live tokens and keys, a record, and fresh single-use things (codes,
 * login and consent pages) on demand, so each endpoint is fuzzed around requests that are valid
 * but for what the fuzzer changed.
 */
export interface FuzzWorld {
  server: TestServer;
  prober: Prober;
  user: SeededUser;
  workspaceId: string;
  /** A workspace that exists but the user is not a member of. */
  otherWorkspaceId: string;
  /** client_secret_post, authorization_code + refresh_token: the token endpoint's client. */
  confidential: RegisteredClient;
  /** client_secret_basic. */
  basic: RegisteredClient;
  /** token_endpoint_auth_method none. */
  publicClient: RegisteredClient;
  /** client_credentials, bound to the workspace. */
  machine: RegisteredClient;
  /** The client whose user token the data API and userinfo are fuzzed with (its grant is never touched by refresh fuzzing). */
  apiClient: RegisteredClient;
  /** A user access token with `openid api profile`, of apiClient. */
  userAccessToken: string;
  /** A client-credentials access token of machine. */
  machineToken: string;
  apiKey: string;
  /** Key ids of the server's signing keys, for JWT-shaped junk that names a real key. */
  kids: string[];
  redirectUris: string[];
  /** The refresh token of confidential's grant; replaced when a fuzzed request rotates it. */
  refreshToken: string;
  /** An ID token of confidential (for id_token_hint). */
  idToken: string;
  /** An initial access token of the workspace (fuzzed only as near misses, so never used up). */
  initialAccessToken: string;
  /** A company in the workspace; recreated if a fuzzed request deletes it. */
  companyId: string;
  /** RFC 7592: a client whose registration is fuzzed; re-registered if a fuzzed request deletes it. */
  managed: RegisteredClient;
  codes: CodeSupply;
  pages: PageSupply;
  stop(): Promise<void>;
}

/**
 * Rate limits high enough that thousands of requests from one address, to one client and one
 * account, are never refused for their number: the fuzzing is about content. (The limits stay on,
 * so their own parsing of each request is fuzzed too; a 429 would still be a valid refusal.)
 */
const GENEROUS_LIMITS = {
  RATE_LIMIT_REGISTRATION: '100000000/1h',
  RATE_LIMIT_TOKEN_CLIENT: '100000000/1m',
  RATE_LIMIT_TOKEN_ADDRESS: '100000000/1m',
  RATE_LIMIT_LOGIN_ADDRESS: '100000000/15m',
  RATE_LIMIT_LOGIN_ACCOUNT: '100000000',
  RATE_LIMIT_DATA_API: '100000000/1m',
  RATE_LIMIT_CREDENTIAL_ADDRESS: '100000000/1m',
  RATE_LIMIT_INTERACTION_ADDRESS: '100000000/10m',
};

export async function startFuzzWorld(env: Record<string, string> = {}): Promise<FuzzWorld> {
  const server = await startServer({ env: { ...GENEROUS_LIMITS, ...env } });
  const file = sqliteFile(server.store);
  if (!file) throw new Error('the fuzz tests read the embedded store: start the server on sqlite:');
  const watch = new StoreWatch(file);
  const user = await seedUser(server, [{ workspace: 'Fuzz' }]);
  const other = await seedUser(server, [{ workspace: 'Elsewhere' }]);
  const workspaceId = user.workspaces[0]!.id;

  const confidential = await registerClient(server.issuer, { client_name: 'Fuzz confidential', scope: 'openid api profile' });
  const apiClient = await registerClient(server.issuer, { client_name: 'Fuzz API client' });
  const basic = await registerClient(server.issuer, { client_name: 'Fuzz basic', token_endpoint_auth_method: 'client_secret_basic' });
  const publicClient = await registerClient(server.issuer, { client_name: 'Fuzz public', token_endpoint_auth_method: 'none' });
  const { client: machine, access_token: machineToken } = await clientCredentialsToken(server, workspaceId);
  const userToken = await userAccessToken(server, apiClient, user, 'openid api profile');
  const codes = new CodeSupply(server, confidential, user);
  const first = await codes.take();
  const { refresh_token: refreshToken, id_token: idToken } = await redeemForRefreshToken(server, confidential, first);
  const key = await createApiKey(server, workspaceId, { name: 'fuzz' });
  const jwks = await (await fetch(`${server.issuer}/oauth/jwks`)).json() as { keys: Array<{ kid?: string }> };

  const world: FuzzWorld = {
    server,
    prober: new Prober(server.origin, watch),
    user,
    workspaceId,
    otherWorkspaceId: other.workspaces[0]!.id,
    confidential,
    basic,
    publicClient,
    machine,
    apiClient,
    userAccessToken: userToken.access_token,
    machineToken,
    apiKey: key.key,
    kids: jwks.keys.map(({ kid }) => kid).filter((kid): kid is string => typeof kid === 'string'),
    redirectUris: [REDIRECT_URI],
    refreshToken,
    idToken,
    initialAccessToken: await initialAccessToken(server, workspaceId, { uses: 1000 }),
    companyId: await createCompany(server, key.key),
    managed: await registerClient(server.issuer, { client_name: 'Fuzz managed' }),
    codes,
    pages: new PageSupply(server, publicClient, user),
    stop: async () => {
      watch.close();
      closeConnections();
      await server.stop();
    },
  };
  return world;
}

/** A UserAgent that can also hand its cookies over, to send them with hand-made requests. */
class CookieAgent extends UserAgent {
  readonly #jar = new Map<string, string>();

  override async request(url: string, init: { method?: string; form?: Record<string, string> } = {}): Promise<Response> {
    const response = await super.request(url, init);
    for (const cookie of response.headers.getSetCookie()) {
      const [pair = ''] = cookie.split(';');
      const eq = pair.indexOf('=');
      const value = pair.slice(eq + 1);
      if (/expires=Thu, 01 Jan 1970/i.test(cookie) || value === '') this.#jar.delete(pair.slice(0, eq));
      else this.#jar.set(pair.slice(0, eq), value);
    }
    return response;
  }

  cookieHeader(): string {
    return [...this.#jar].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

export async function createCompany(server: TestServer, credential: string): Promise<string> {
  const created = await api<{ data: { company: { id: string } } }>(server, '/rest/companies', { credential, json: { name: 'Fuzz Inc', employees: 3 } });
  if (created.status !== 201) throw new Error(`could not create a company: ${created.status}`);
  return created.body.data.company.id;
}

export interface Code {
  code: string;
  verifier: string;
  /** When it was issued (ms); codes live 60 s. */
  issuedAt: number;
}

async function redeemForRefreshToken(server: TestServer, client: RegisteredClient, code: Code): Promise<{ refresh_token: string; id_token: string }> {
  const response = await fetch(`${server.issuer}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: code.code, code_verifier: code.verifier, redirect_uri: REDIRECT_URI, client_id: client.client_id, client_secret: client.client_secret! }),
  });
  const body = await response.json() as { refresh_token?: string; id_token?: string };
  if (!body.refresh_token || !body.id_token) throw new Error(`no refresh or ID token: ${JSON.stringify(body)}`);
  return { refresh_token: body.refresh_token, id_token: body.id_token };
}

/** How long a fixture code is used before a fresh one is fetched: well within its 60 s. */
const CODE_FRESH_MS = 30_000;

/**
 * Authorization codes of one client, from the real flow: the first signs in and consents, the
 * next ride on the same browser session and grant (no password hashing each time).
 */
export class CodeSupply {
  readonly #server: TestServer;
  readonly #client: RegisteredClient;
  readonly #user: SeededUser;
  readonly #agent = new CookieAgent();
  #current: Code | undefined;

  constructor(server: TestServer, client: RegisteredClient, user: SeededUser) {
    this.#server = server;
    this.#client = client;
    this.#user = user;
  }

  /** A fresh code, not handed out before (for a test that redeems it). */
  async take(): Promise<Code> {
    const request = codeRequest(this.#server.issuer, this.#client.client_id, { scope: 'openid api profile' });
    const callback = await authorize(this.#agent, request.url, this.#server.origin, { email: this.#user.email, password: this.#user.password });
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`no code: ${callback.href}`);
    return { code, verifier: request.verifier, issuedAt: Date.now() };
  }

  /** The code fuzzed requests are built around: the same one until it is used or getting old. */
  async current(): Promise<Code> {
    if (!this.#current || Date.now() - this.#current.issuedAt > CODE_FRESH_MS) this.#current = await this.take();
    return this.#current;
  }

  /** A fuzzed request redeemed the current code. */
  used(): void {
    this.#current = undefined;
  }

  /** The signed-in browser's cookies, for authorization requests made in a session. */
  cookieHeader(): string {
    return this.#agent.cookieHeader();
  }
}

export interface Page {
  /** The interaction's uid, from its URL. */
  uid: string;
  /** The form's CSRF token. */
  csrf: string;
  /** The browser's cookies (the engine binds the interaction to them). */
  cookie: string;
  openedAt: number;
}

/** An interaction is good for 10 minutes; a fixture page is replaced well before. */
const PAGE_FRESH_MS = 5 * 60_000;

/**
 * Open login and consent pages of real authorization requests, kept until a fuzzed request
 * finishes them (a consent form with any decision but `allow` denies, which ends the interaction).
 */
export class PageSupply {
  readonly #server: TestServer;
  readonly #client: RegisteredClient;
  readonly #user: SeededUser;
  #login: Page | undefined;
  #consent: Page | undefined;

  constructor(server: TestServer, client: RegisteredClient, user: SeededUser) {
    this.#server = server;
    this.#client = client;
    this.#user = user;
  }

  async login(): Promise<Page> {
    if (!this.#login || Date.now() - this.#login.openedAt > PAGE_FRESH_MS) this.#login = await this.#open(false);
    return this.#login;
  }

  async consent(): Promise<Page> {
    if (!this.#consent || Date.now() - this.#consent.openedAt > PAGE_FRESH_MS) this.#consent = await this.#open(true);
    return this.#consent;
  }

  /** A fuzzed request finished the page's interaction. */
  finished(page: Page): void {
    if (this.#login === page) this.#login = undefined;
    if (this.#consent === page) this.#consent = undefined;
  }

  async #open(signedIn: boolean): Promise<Page> {
    const agent = new CookieAgent();
    // prompt=consent: the consent page shows even if an earlier fuzzed form allowed (it cannot: the workspace is never the user's).
    const { url } = codeRequest(this.#server.issuer, this.#client.client_id, { scope: 'api profile', prompt: 'consent' });
    let { url: at, response } = await agent.follow(url, this.#server.origin);
    let html = await response.text();
    if (signedIn) {
      const action = formAction(html);
      const posted = await agent.request(new URL(action, this.#server.origin).href, { form: { csrf: field(html, 'csrf'), email: this.#user.email, password: this.#user.password } });
      const location = posted.headers.get('location');
      if (!location) throw new Error(`login failed: ${posted.status}`);
      ({ url: at, response } = await agent.follow(new URL(location, this.#server.origin).href, this.#server.origin));
      html = await response.text();
      if (!formAction(html).endsWith('/consent')) throw new Error(`expected the consent page at ${at}`);
    }
    const uid = /\/interaction\/([^/?]+)/.exec(at)?.[1];
    if (!uid) throw new Error(`expected an interaction page, got ${at}`);
    return { uid, csrf: field(html, 'csrf'), cookie: agent.cookieHeader(), openedAt: Date.now() };
  }
}

function formAction(html: string): string {
  const action = /<form method="post" action="([^"]+)"/.exec(html)?.[1];
  if (!action) throw new Error(`no form on the page: ${html.slice(0, 300)}`);
  return action;
}

function field(html: string, name: string): string {
  const value = new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1];
  if (value === undefined) throw new Error(`no ${name} field on the page`);
  return value;
}
