import { randomBytes } from 'node:crypto';

import { auth, extractWWWAuthenticateParams } from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { expect } from 'chai';
import { decodeJwt } from 'jose';

import { McpHostProvider, type ClientAuthMethod } from '../support/mcp_host.ts';
import { registerClient } from '../support/oauth.ts';
import { freePort, initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * A stock MCP client (@modelcontextprotocol/sdk's `auth()`), given nothing but the data API's URL,
 * against the real server process: it reads the 401's `WWW-Authenticate`, fetches the protected
 * resource metadata (RFC 9728), discovers the authorization server (RFC 8414), registers itself
 * (RFC 7591), sends the user to log in and consent (code + PKCE S256, resource indicator), exchanges
 * the code, and its token works on the data API. When the access token is refused, `auth()` again
 * refreshes it without the user.
 */

interface Company {
  id: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}

interface CompanyList {
  data: { companies: Company[] };
  pageInfo: { hasNextPage: boolean; startCursor: string | null; endCursor: string | null };
  totalCount: number;
}

/** The requests the SDK made, as "METHOD url" plus the form body of POSTs. */
interface Recorded {
  method: string;
  url: string;
  form?: URLSearchParams;
  authorization?: string | null;
}

function recordingFetch(log: Recorded[]): FetchLike {
  return async (url, init) => {
    const entry: Recorded = { method: init?.method ?? 'GET', url: String(url) };
    if (init?.body instanceof URLSearchParams) entry.form = new URLSearchParams(init.body);
    entry.authorization = new Headers(init?.headers).get('authorization');
    log.push(entry);
    return fetch(url, init);
  };
}

/** The same token with one character in the middle of its signature changed. */
function tamperSignature(jwt: string): string {
  const [header, payload, signature] = jwt.split('.') as [string, string, string];
  const at = Math.floor(signature.length / 2);
  const flipped = signature[at] === 'A' ? 'B' : 'A';
  return `${header}.${payload}.${signature.slice(0, at)}${flipped}${signature.slice(at + 1)}`;
}

describe('a stock MCP client (@modelcontextprotocol/sdk) starting from the data API URL', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;
  let redirectUrl: string;

  const companiesUrl = () => `${server.issuer}/rest/companies`;
  const resource = () => `${server.issuer}/rest`;

  before(async () => {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Acme', role: 'member' }]);
    // Nothing listens there: the server redirects the browser to it, and the user agent stops.
    redirectUrl = `http://127.0.0.1:${await freePort()}/callback`;
  });

  after(async () => {
    await server?.stop();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-40).join('\n'));
  });

  async function callApi(accessToken: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
    return fetch(companiesUrl(), {
      method: init.method ?? 'GET',
      headers: {
        authorization: `Bearer ${accessToken}`,
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
  }

  /**
   * What an MCP client does on its first request: 401, read the challenge, `auth()` (discovery,
   * registration, authorization request), the user logs in and consents in the browser, then
   * `auth()` with the code.
   */
  async function connect(provider: McpHostProvider, log: Recorded[]): Promise<void> {
    const fetchFn = recordingFetch(log);
    const probe = await fetch(companiesUrl());
    expect(probe.status).to.equal(401);
    const challenge = extractWWWAuthenticateParams(probe);
    expect(challenge.resourceMetadataUrl?.href).to.equal(`${server.origin}/.well-known/oauth-protected-resource/rest`);

    const started = await auth(provider, { serverUrl: companiesUrl(), resourceMetadataUrl: challenge.resourceMetadataUrl, fetchFn });
    expect(started).to.equal('REDIRECT');
    expect(provider.redirects).to.have.length(1);
    const authorizationUrl = provider.redirects[0]!;
    expect(authorizationUrl.href.startsWith(`${server.issuer}/oauth/authorize?`)).to.equal(true);
    expect(authorizationUrl.searchParams.get('code_challenge_method')).to.equal('S256');
    expect(authorizationUrl.searchParams.get('resource')).to.equal(resource());
    expect(authorizationUrl.searchParams.get('scope')).to.equal('api');

    const callback = await authorize(new UserAgent(), authorizationUrl.href, server.origin, { email: user.email, password: user.password });
    expect(`${callback.origin}${callback.pathname}`).to.equal(redirectUrl);
    expect(callback.searchParams.get('error'), callback.href).to.equal(null);
    expect(callback.searchParams.get('state')).to.equal(provider.lastState());
    expect(callback.searchParams.get('iss')).to.equal(server.issuer);
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`no code in ${callback.href}`);

    const finished = await auth(provider, { serverUrl: companiesUrl(), authorizationCode: code, resourceMetadataUrl: challenge.resourceMetadataUrl, fetchFn });
    expect(finished).to.equal('AUTHORIZED');
  }

  /** The access token is a JWT for the data API, for this client, with the api scope. */
  function expectDataApiToken(accessToken: string, clientId: string): void {
    const claims = decodeJwt(accessToken);
    expect(claims.iss).to.equal(server.issuer);
    expect(claims.aud).to.equal(resource());
    expect(claims.sub).to.equal(user.id);
    expect(claims.client_id).to.equal(clientId);
    expect(claims.scope).to.equal('api');
    expect(claims.workspace_id, 'the workspace the user consented for').to.equal(user.workspaces[0]!.id);
  }

  /**
   * The whole journey for one kind of client: connect, create and list a company, have the access
   * token refused, `auth()` again (a refresh, no user), list again; then once more.
   */
  async function journey(method: ClientAuthMethod): Promise<void> {
    const provider = new McpHostProvider(redirectUrl, { method });
    const log: Recorded[] = [];
    await connect(provider, log);

    // Discovery started from the API's challenge and found this server; the client registered itself.
    const fetched = log.map(({ method: verb, url }) => `${verb} ${url}`);
    expect(fetched[0]).to.equal(`GET ${server.origin}/.well-known/oauth-protected-resource/rest`);
    expect(fetched).to.include(`GET ${server.origin}/.well-known/oauth-authorization-server`);
    expect(fetched).to.include(`POST ${server.issuer}/oauth/register`);
    expect(fetched.at(-1)).to.equal(`POST ${server.issuer}/oauth/token`);

    const client = provider.registered();
    expect(client.client_id).to.be.a('string').and.not.empty;
    expect(client.token_endpoint_auth_method).to.equal(method);
    if (method === 'none') expect(client.client_secret).to.equal(undefined);
    else expect(client.client_secret).to.be.a('string').and.not.empty;

    // The code exchange authenticated the way the client registered, and named the resource.
    const exchange = log.at(-1)!;
    expect(exchange.form?.get('grant_type')).to.equal('authorization_code');
    expect(exchange.form?.get('resource')).to.equal(resource());
    expect(exchange.form?.get('code_verifier')).to.be.a('string');
    if (method === 'client_secret_basic') {
      expect(exchange.authorization).to.match(/^Basic /);
      expect(exchange.form?.has('client_secret')).to.equal(false);
    } else {
      expect(exchange.authorization).to.equal(null);
      expect(exchange.form?.get('client_id')).to.equal(client.client_id);
      expect(exchange.form?.has('client_secret')).to.equal(method === 'client_secret_post');
    }

    const first = provider.currentTokens();
    expect(first.token_type.toLowerCase()).to.equal('bearer');
    expect(first.refresh_token, 'a refresh token for a client registered with the refresh_token grant').to.be.a('string');
    expect(first.scope).to.equal('api');
    expectDataApiToken(first.access_token, client.client_id);

    // The token works on the data API: create a company, then find it in the list.
    const name = `Acme ${method} ${randomBytes(4).toString('hex')}`;
    const created = await callApi(first.access_token, { method: 'POST', body: { name } });
    expect(created.status, await created.clone().text()).to.equal(201);
    const company = (await created.json() as { data: { company: Company } }).data.company;
    expect(company.name).to.equal(name);
    expect(company.id).to.be.a('string');
    const listed = await callApi(first.access_token);
    expect(listed.status).to.equal(200);
    const list = await listed.json() as CompanyList;
    expect(list.data.companies.map((c) => c.id)).to.include(company.id);
    expect(list.totalCount).to.be.a('number').and.at.least(1);

    // The API refuses a token it cannot verify, as an expired or revoked one would be; the client
    // calls auth() again, which refreshes without sending the user anywhere.
    const refused = await callApi(tamperSignature(first.access_token));
    expect(refused.status).to.equal(401);
    const again = extractWWWAuthenticateParams(refused);
    expect(again.error).to.equal('invalid_token');
    expect(again.resourceMetadataUrl?.href).to.equal(`${server.origin}/.well-known/oauth-protected-resource/rest`);

    const refreshLog: Recorded[] = [];
    const refreshed = await auth(provider, { serverUrl: companiesUrl(), resourceMetadataUrl: again.resourceMetadataUrl, fetchFn: recordingFetch(refreshLog) });
    expect(refreshed).to.equal('AUTHORIZED');
    expect(provider.redirects, 'no new trip to the browser').to.have.length(1);
    const refreshRequest = refreshLog.at(-1)!;
    expect(refreshRequest.form?.get('grant_type')).to.equal('refresh_token');
    expect(refreshRequest.form?.get('resource')).to.equal(resource());
    expect(provider.registered().client_id, 'the same registration is reused').to.equal(client.client_id);

    const second = provider.currentTokens();
    expect(second.access_token).not.to.equal(first.access_token);
    expect(second.refresh_token, 'the SDK keeps the rotated refresh token').to.be.a('string').and.not.equal(first.refresh_token);
    expectDataApiToken(second.access_token, client.client_id);
    const listedAgain = await callApi(second.access_token);
    expect(listedAgain.status).to.equal(200);
    expect((await listedAgain.json() as CompanyList).data.companies.map((c) => c.id)).to.include(company.id);

    // And again: whatever refresh token the client kept (rotated or not) still works.
    expect(await auth(provider, { serverUrl: companiesUrl(), resourceMetadataUrl: again.resourceMetadataUrl })).to.equal('AUTHORIZED');
    const third = provider.currentTokens();
    expect(third.access_token).not.to.equal(second.access_token);
    expect((await callApi(third.access_token)).status).to.equal(200);
  }

  it('confidential client (client_secret_post): registers, user logs in and consents, creates and lists a company, refreshes and lists again', async () => {
    await journey('client_secret_post');
  });

  it('confidential client (client_secret_basic): the same journey, authenticating with HTTP Basic', async () => {
    await journey('client_secret_basic');
  });

  it('public client (none, PKCE only): the same journey', async () => {
    await journey('none');
  });

  it('machine-to-machine (the SDK\'s ClientCredentialsProvider): auth() gets a workspace token by client_credentials, no user, no registration; it works on the data API', async () => {
    // A client bound to the workspace, registered by an operator with an initial access token.
    const workspace = user.workspaces[0]!.id;
    const registered = await registerClient(server.issuer, {
      client_name: 'MCP service account',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      // What ClientCredentialsProvider authenticates with (it says so in its client metadata).
      token_endpoint_auth_method: 'client_secret_basic',
    }, await initialAccessToken(server, workspace));
    const provider = new ClientCredentialsProvider({ clientId: registered.client_id, clientSecret: registered.client_secret!, expectedIssuer: server.issuer });

    const probe = await fetch(companiesUrl());
    expect(probe.status).to.equal(401);
    const { resourceMetadataUrl } = extractWWWAuthenticateParams(probe);
    const log: Recorded[] = [];
    expect(await auth(provider, { serverUrl: companiesUrl(), resourceMetadataUrl, fetchFn: recordingFetch(log) })).to.equal('AUTHORIZED');

    // Discovery, then straight to the token endpoint: HTTP Basic and the resource. The SDK sends a
    // scope here only if the provider was given one (not the metadata's scopes_supported, as for
    // the code flow); without one, the server's default scope, api, applies.
    const fetched = log.map(({ method: verb, url }) => `${verb} ${url}`);
    expect(fetched[0]).to.equal(`GET ${server.origin}/.well-known/oauth-protected-resource/rest`);
    expect(fetched).not.to.include(`POST ${server.issuer}/oauth/register`);
    expect(fetched.at(-1)).to.equal(`POST ${server.issuer}/oauth/token`);
    const tokenRequest = log.at(-1)!;
    expect(tokenRequest.form?.get('grant_type')).to.equal('client_credentials');
    expect(tokenRequest.form?.get('resource')).to.equal(resource());
    expect(tokenRequest.form?.has('scope')).to.equal(false);
    expect(tokenRequest.authorization).to.match(/^Basic /);
    expect(tokenRequest.form?.has('client_secret')).to.equal(false);

    const tokens = provider.tokens();
    if (!tokens) throw new Error('no tokens saved');
    expect(tokens.token_type.toLowerCase()).to.equal('bearer');
    expect(tokens.refresh_token).to.equal(undefined);
    expect(tokens.scope).to.equal('api');
    const claims = decodeJwt(tokens.access_token);
    expect(claims.aud).to.equal(resource());
    expect(claims.client_id).to.equal(registered.client_id);
    expect(claims.sub, 'no user: the client is the subject').to.equal(registered.client_id);
    expect(claims.workspace_id).to.equal(workspace);
    expect(claims.scope).to.equal('api');

    // The workspace token creates and lists records in the client's workspace.
    const name = `Synced by an MCP service ${randomBytes(4).toString('hex')}`;
    const created = await callApi(tokens.access_token, { method: 'POST', body: { name } });
    expect(created.status, await created.clone().text()).to.equal(201);
    const listed = await callApi(tokens.access_token);
    expect(listed.status).to.equal(200);
    expect((await listed.json() as CompanyList).data.companies.map((c) => c.name)).to.include(name);

    // When the API refuses the token, auth() again simply fetches a new one (there is no refresh token).
    expect((await callApi(tamperSignature(tokens.access_token))).status).to.equal(401);
    expect(await auth(provider, { serverUrl: companiesUrl(), resourceMetadataUrl })).to.equal('AUTHORIZED');
    const second = provider.tokens()!;
    expect(second.access_token).not.to.equal(tokens.access_token);
    expect((await callApi(second.access_token)).status).to.equal(200);

    // A wrong secret gets no token: auth() fails with the server's invalid_client.
    const wrong = new ClientCredentialsProvider({ clientId: registered.client_id, clientSecret: `${registered.client_secret}x`, expectedIssuer: server.issuer });
    let failure: Error | undefined;
    await auth(wrong, { serverUrl: companiesUrl(), resourceMetadataUrl }).catch((error: Error) => { failure = error; });
    expect(failure?.constructor.name).to.equal('InvalidClientError');
    expect(wrong.tokens()).to.equal(undefined);
  });

  it('a client that never saw the challenge finds the metadata at the well-known URL from the API URL alone', async () => {
    const provider = new McpHostProvider(redirectUrl, { method: 'none' });
    const log: Recorded[] = [];
    expect(await auth(provider, { serverUrl: companiesUrl(), fetchFn: recordingFetch(log) })).to.equal('REDIRECT');
    // Path-aware first (/.well-known/oauth-protected-resource/rest/companies), then the root.
    const prm = log.filter(({ url }) => url.includes('/.well-known/oauth-protected-resource'));
    expect(prm.at(-1)!.url).to.equal(`${server.origin}/.well-known/oauth-protected-resource`);
    expect(provider.redirects[0]!.searchParams.get('resource')).to.equal(resource());
    expect(provider.registered().client_id).to.be.a('string');
  });
});

describe('a stock MCP client against a server under a base path', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;

  before(async () => {
    server = await startServer({ basePath: '/auth' });
    user = await seedUser(server, [{ workspace: 'Acme', role: 'member' }]);
  });

  after(async () => {
    await server?.stop();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-40).join('\n'));
  });

  it('discovers {issuer}/rest and the issuer under /auth, authorizes and calls the API', async () => {
    const companies = `${server.issuer}/rest/companies`;
    const probe = await fetch(companies);
    expect(probe.status).to.equal(401);
    const { resourceMetadataUrl } = extractWWWAuthenticateParams(probe);
    expect(resourceMetadataUrl?.href).to.equal(`${server.origin}/.well-known/oauth-protected-resource/auth/rest`);

    const provider = new McpHostProvider(`http://127.0.0.1:${await freePort()}/callback`, { method: 'client_secret_post' });
    expect(await auth(provider, { serverUrl: companies, resourceMetadataUrl })).to.equal('REDIRECT');
    const authorizationUrl = provider.redirects[0]!;
    expect(authorizationUrl.href.startsWith(`${server.issuer}/oauth/authorize?`)).to.equal(true);
    expect(authorizationUrl.searchParams.get('resource')).to.equal(`${server.issuer}/rest`);

    const callback = await authorize(new UserAgent(), authorizationUrl.href, server.origin, { email: user.email, password: user.password });
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`no code in ${callback.href}`);
    expect(await auth(provider, { serverUrl: companies, authorizationCode: code, resourceMetadataUrl })).to.equal('AUTHORIZED');

    const accessToken = provider.currentTokens().access_token;
    expect(decodeJwt(accessToken).aud).to.equal(`${server.issuer}/rest`);
    const response = await fetch(companies, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(response.status).to.equal(200);
    expect((await response.json() as CompanyList).data.companies).to.be.an('array');
  });
});
