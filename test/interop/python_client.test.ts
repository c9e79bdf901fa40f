import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';
import { decodeJwt } from 'jose';

import { registerClient, type RegisteredClient } from '../support/oauth.ts';
import { freePort, initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * A stock Python client, Authlib's `OAuth2Session` (Debian's python3-authlib 1.2.0 and
 * python3-requests, run with /usr/bin/python3), against the real server process. The Python side
 * (test/support/authlib_client.py) finds the endpoints in the discovery document and does every
 * OAuth request itself; this side registers the clients, logs the user in and consents (as the
 * user's browser would), and checks what the library got.
 */

const SCRIPT = fileURLToPath(new URL('../support/authlib_client.py', import.meta.url));
/** Debian's interpreter, which has Authlib; a `python3` earlier on PATH may be another one without it. */
const PYTHON = '/usr/bin/python3';

interface Outcome<T = unknown> {
  status: number;
  body: T;
}

interface RecordedRequest {
  method: string;
  url: string;
  /** The Authorization header's scheme ("Basic", "Bearer"), or null. */
  authorization: string | null;
  /** The names of the form body's fields. */
  form: string[];
  status: number;
}

interface TokenResponse {
  access_token: string;
  token_type: string;
  expires_in: number;
  scope: string;
  refresh_token?: string;
  id_token?: string;
}

interface CodeFlowResult {
  metadata_issuer: string;
  token: TokenResponse;
  userinfo: Outcome<Record<string, unknown>>;
  list: Outcome<{ data: { companies: Array<{ name: string }> } }>;
  refreshed: TokenResponse;
  list_after_refresh: Outcome;
  revocation: Outcome;
  refresh_after_revocation: string;
  list_after_revocation: Outcome<{ error: string }>;
  userinfo_after_revocation: Outcome;
  requests: RecordedRequest[];
}

interface ClientCredentialsResult {
  metadata_issuer: string;
  token: TokenResponse;
  create: Outcome<{ data: { company: { id: string; name: string } } }>;
  list: Outcome<{ data: { companies: Array<{ id: string; name: string }> } }>;
  requests: RecordedRequest[];
}

type Message = { event: 'authorization_url'; url: string; state: string }
  | ({ event: 'done' } & Record<string, unknown>)
  | { event: 'error'; error: string; trace: string };

/** The Python client as a child process talking JSON lines. */
class AuthlibClient {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #messages: Message[] = [];
  readonly #waiters: Array<() => void> = [];
  #stderr = '';
  #exited = false;

  constructor(job: Record<string, unknown>) {
    // No PYTHON* variables from the caller's environment: Debian's interpreter with its own packages.
    this.#child = spawn(PYTHON, [SCRIPT], { env: { PATH: '/usr/bin:/bin', HOME: process.env.HOME ?? '' }, stdio: ['pipe', 'pipe', 'pipe'] });
    this.#child.stderr.on('data', (chunk: Buffer) => { this.#stderr += chunk.toString(); });
    createInterface({ input: this.#child.stdout }).on('line', (line) => {
      this.#messages.push(JSON.parse(line) as Message);
      this.#waiters.splice(0).forEach((wake) => wake());
    });
    this.#child.once('exit', () => {
      this.#exited = true;
      this.#waiters.splice(0).forEach((wake) => wake());
    });
    this.send(job);
  }

  send(message: Record<string, unknown>): void {
    this.#child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  /** The next message; a Python failure becomes this test's failure, with its traceback. */
  async next(timeoutMs = 10_000): Promise<Message> {
    const deadline = Date.now() + timeoutMs;
    while (!this.#messages.length) {
      if (this.#exited) throw new Error(`the Python client exited without answering:\n${this.#stderr}`);
      if (Date.now() > deadline) throw new Error(`no answer from the Python client within ${timeoutMs} ms:\n${this.#stderr}`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
    const message = this.#messages.shift()!;
    if (message.event === 'error') throw new Error(`Python client failed: ${message.error}\n${message.trace}\n${this.#stderr}`);
    return message;
  }

  async done<T>(): Promise<T> {
    const message = await this.next();
    if (message.event !== 'done') throw new Error(`expected the results, got ${JSON.stringify(message)}`);
    return message as unknown as T;
  }

  kill(): void {
    if (!this.#exited) this.#child.kill();
  }
}

describe('a stock Python client (Authlib OAuth2Session)', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;
  let redirectUri: string;
  const running: AuthlibClient[] = [];

  before(async () => {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Python Co', role: 'member' }]);
    // Nothing listens there: the user agent stops at the redirect and hands the URL to Python.
    redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  });

  afterEach(function () {
    running.splice(0).forEach((client) => client.kill());
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-40).join('\n'));
  });

  after(async () => {
    await server?.stop();
  });

  function start(job: Record<string, unknown>): AuthlibClient {
    const client = new AuthlibClient({ issuer: server.issuer, ...job });
    running.push(client);
    return client;
  }

  const tokenEndpoint = () => `${server.issuer}/oauth/token`;
  const requestsTo = (result: { requests: RecordedRequest[] }, url: string) => result.requests.filter((request) => request.url === url);

  /** The request authenticated the way the client registered: HTTP Basic, or the secret in the form. */
  function expectClientAuthentication(request: RecordedRequest, method: 'client_secret_basic' | 'client_secret_post'): void {
    if (method === 'client_secret_basic') {
      expect(request.authorization, `${request.url} with HTTP Basic`).to.equal('Basic');
      expect(request.form).not.to.include('client_secret');
    } else {
      expect(request.authorization, `${request.url} without an Authorization header`).to.equal(null);
      expect(request.form).to.include.members(['client_id', 'client_secret']);
    }
  }

  async function codeFlow(method: 'client_secret_basic' | 'client_secret_post'): Promise<void> {
    const client: RegisteredClient = await registerClient(server.issuer, {
      client_name: `Authlib (${method})`,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: method,
    });
    const python = start({
      flow: 'authorization_code',
      client_id: client.client_id,
      client_secret: client.client_secret,
      auth_method: method,
      redirect_uri: redirectUri,
      scope: 'openid profile api',
    });

    // Authlib built the authorization request from the discovered endpoint, with PKCE S256.
    const started = await python.next();
    if (started.event !== 'authorization_url') throw new Error(`expected the authorization URL, got ${JSON.stringify(started)}`);
    const url = new URL(started.url);
    expect(`${url.origin}${url.pathname}`).to.equal(`${server.issuer}/oauth/authorize`);
    expect(url.searchParams.get('client_id')).to.equal(client.client_id);
    expect(url.searchParams.get('response_type')).to.equal('code');
    expect(url.searchParams.get('redirect_uri')).to.equal(redirectUri);
    expect(url.searchParams.get('code_challenge_method')).to.equal('S256');
    expect(url.searchParams.get('code_challenge')).to.match(/^[\w-]{43}$/);
    expect(url.searchParams.get('state')).to.equal(started.state);

    const callback = await authorize(new UserAgent(), started.url, server.origin, { email: user.email, password: user.password });
    expect(callback.searchParams.get('error'), callback.href).to.equal(null);
    expect(callback.searchParams.get('iss')).to.equal(server.issuer);
    python.send({ callback: callback.href });
    const result = await python.done<CodeFlowResult>();
    expect(result.metadata_issuer).to.equal(server.issuer);

    // The code exchange: tokens for the data API, for this user and workspace.
    expect(result.token.token_type.toLowerCase()).to.equal('bearer');
    expect(result.token.scope).to.equal('openid profile api');
    expect(result.token.refresh_token).to.be.a('string');
    expect(result.token.id_token).to.be.a('string');
    const claims = decodeJwt(result.token.access_token);
    expect(claims.aud).to.equal(`${server.issuer}/rest`);
    expect(claims.sub).to.equal(user.id);
    expect(claims.client_id).to.equal(client.client_id);
    expect(claims.workspace_id).to.equal(user.workspaces[0]!.id);
    const [exchange, refresh, failedRefresh] = requestsTo(result, tokenEndpoint());
    expect(exchange!.status).to.equal(200);
    expect(exchange!.form).to.include.members(['grant_type', 'code', 'code_verifier', 'redirect_uri']);
    expectClientAuthentication(exchange!, method);

    // Userinfo and the data API with the access token.
    expect(result.userinfo.status).to.equal(200);
    expect(result.userinfo.body).to.deep.include({ sub: user.id, email: user.email, name: user.name });
    expect(result.userinfo.body.workspace).to.deep.equal({ id: user.workspaces[0]!.id, name: 'Python Co', role: 'member' });
    expect(result.list.status).to.equal(200);
    expect(result.list.body.data.companies).to.be.an('array');

    // Refresh: a new access token that works, and a rotated refresh token.
    expect(refresh!.status).to.equal(200);
    expect(refresh!.form).to.include.members(['grant_type', 'refresh_token']);
    expectClientAuthentication(refresh!, method);
    expect(result.refreshed.access_token).not.to.equal(result.token.access_token);
    expect(result.refreshed.refresh_token).to.be.a('string').and.not.equal(result.token.refresh_token);
    expect(decodeJwt(result.refreshed.access_token).sub).to.equal(user.id);
    expect(result.list_after_refresh.status).to.equal(200);

    // Revocation (RFC 7009) of the refresh token: the grant is gone, and so are its tokens.
    const [revocation] = requestsTo(result, `${server.issuer}/oauth/revoke`);
    expectClientAuthentication(revocation!, method);
    expect(result.revocation.status).to.equal(200);
    expect(result.refresh_after_revocation).to.equal('invalid_grant');
    expect(failedRefresh!.status).to.equal(400);
    expect(result.list_after_revocation.status).to.equal(401);
    expect(result.list_after_revocation.body.error).to.equal('invalid_token');
    expect(result.userinfo_after_revocation.status).to.equal(401);
  }

  it('authorization code + PKCE with client_secret_basic: exchange, userinfo, data API, refresh, revocation', async () => {
    await codeFlow('client_secret_basic');
  });

  it('authorization code + PKCE with client_secret_post: the same, with the secret in the form', async () => {
    await codeFlow('client_secret_post');
  });

  it('client_credentials (fetch_token(grant_type="client_credentials")): a workspace token that creates and lists companies', async () => {
    const workspace = user.workspaces[0]!.id;
    const client = await registerClient(server.issuer, {
      client_name: 'Authlib nightly sync',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    }, await initialAccessToken(server, workspace));
    const python = start({ flow: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret, auth_method: 'client_secret_basic', scope: 'api', company: 'Synced by Authlib' });
    const result = await python.done<ClientCredentialsResult>();

    expect(result.token.token_type.toLowerCase()).to.equal('bearer');
    expect(result.token.scope).to.equal('api');
    expect(result.token.refresh_token).to.equal(undefined);
    const claims = decodeJwt(result.token.access_token);
    expect(claims.aud).to.equal(`${server.issuer}/rest`);
    expect(claims.client_id).to.equal(client.client_id);
    expect(claims.workspace_id).to.equal(workspace);
    const [tokenRequest] = requestsTo(result, tokenEndpoint());
    expect(tokenRequest!.form).to.include.members(['grant_type', 'scope']);
    expectClientAuthentication(tokenRequest!, 'client_secret_basic');

    expect(result.create.status).to.equal(201);
    expect(result.create.body.data.company.name).to.equal('Synced by Authlib');
    expect(result.list.status).to.equal(200);
    expect(result.list.body.data.companies.map((company) => company.id)).to.include(result.create.body.data.company.id);
  });

  it('client_credentials with a wrong secret: Authlib raises invalid_client and gets no token', async () => {
    const client = await registerClient(server.issuer, {
      grant_types: ['client_credentials'],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    }, await initialAccessToken(server, user.workspaces[0]!.id));
    const python = start({ flow: 'client_credentials', client_id: client.client_id, client_secret: `${client.client_secret}x`, auth_method: 'client_secret_basic', scope: 'api' });
    let failure: Error | undefined;
    await python.next().catch((error: Error) => { failure = error; });
    expect(failure?.message).to.match(/^Python client failed: OAuthError: invalid_client\b/);
  });
});
