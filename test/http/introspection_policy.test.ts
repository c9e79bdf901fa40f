import { expect } from 'chai';
import * as oauth from 'oauth4webapi';

import { basicCredentials, codeRequest, exchangeCode, postCredentials, register, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

/**
 * Introspection is least-privilege (RFC 7662 section 4): a client learns only about the tokens
 * issued to itself, a resource server an operator registered (`admin resource-server create`)
 * also about the access tokens meant for it, and every other caller gets exactly what an unknown
 * token gets, `{"active":false}`. Against the real server process, with tokens from real flows.
 */

interface TokenSet {
  access_token: string;
  refresh_token?: string;
}

interface ResourceServerJson {
  client_id: string;
  client_secret: string;
  client_name: string;
  token_endpoint_auth_method: string;
  introspection_audience: string;
}

/** Client credentials in the form body (client_secret_post) or in an Authorization: Basic header. */
type Caller = { post: Record<string, string> } | { basic: { client_id: string; client_secret: string } };

const insecure = { [oauth.allowInsecureRequests]: true } as const;
const INACTIVE = '{"active":false}';

describe('introspection policy (RFC 7662 section 4)', function () {
  this.timeout(60_000);

  let server: TestServer;
  let audience: string;
  let user: SeededUser;
  /** A: the tokens' owner; B: another confidential client, self-registered. */
  let clientA: RegisteredClient;
  let clientB: RegisteredClient;
  /** A workspace-bound client that gets client-credentials tokens. */
  let service: RegisteredClient;
  let resourceServer: ResourceServerJson;

  async function userTokens(owner: RegisteredClient, scope = 'api profile'): Promise<TokenSet> {
    const { url, verifier } = codeRequest(server.issuer, owner.client_id, { scope });
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`authorization did not give a code: ${callback.href}`);
    const response = await exchangeCode(server.issuer, owner, code, verifier);
    if (response.status !== 200) throw new Error(`code exchange failed ${response.status}: ${await response.text()}`);
    return response.json() as Promise<TokenSet>;
  }

  async function clientCredentialsToken(): Promise<string> {
    const response = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', ...postCredentials(service) });
    if (response.status !== 200) throw new Error(`client_credentials failed ${response.status}: ${await response.text()}`);
    return (await response.json() as TokenSet).access_token;
  }

  /** POST /oauth/introspect; checks the status is 200 and returns the raw body. */
  async function introspectRaw(caller: Caller, token: string, hint?: string): Promise<string> {
    const form: Record<string, string> = { token, ...(hint ? { token_type_hint: hint } : {}) };
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if ('post' in caller) Object.assign(form, caller.post);
    else Object.assign(headers, basicCredentials(caller.basic));
    const response = await fetch(`${server.issuer}/oauth/introspect`, { method: 'POST', headers, body: new URLSearchParams(form).toString() });
    const body = await response.text();
    expect(response.status, body).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    expect(response.headers.get('cache-control')).to.contain('no-store');
    return body;
  }

  async function introspectAs(caller: Caller, token: string, hint?: string): Promise<Record<string, unknown>> {
    return JSON.parse(await introspectRaw(caller, token, hint)) as Record<string, unknown>;
  }

  const as = (client: RegisteredClient): Caller => ({ post: postCredentials(client) });
  const asResourceServer = (): Caller => ({ basic: { client_id: resourceServer.client_id, client_secret: resourceServer.client_secret } });

  /** The caller is told nothing: the exact bytes an unknown token gets, whatever the hint. */
  async function expectNothingRevealed(caller: Caller, token: string, what: string): Promise<void> {
    expect(await introspectRaw(caller, 'no-such-token-was-ever-issued'), 'an unknown token').to.equal(INACTIVE);
    for (const hint of [undefined, 'access_token', 'refresh_token']) {
      expect(await introspectRaw(caller, token, hint), `${what}, hint ${hint ?? 'none'}`).to.equal(INACTIVE);
    }
  }

  async function adminCreateResourceServer(args: string[]): Promise<ResourceServerJson> {
    const result = await server.admin(['resource-server', 'create', ...args, '--json']);
    expect(result.code, result.stderr).to.equal(0);
    return JSON.parse(result.stdout) as ResourceServerJson;
  }

  before(async () => {
    server = await startServer();
    audience = `${server.issuer}/rest`;
    user = await seedUser(server, [{ workspace: 'Acme', role: 'member' }]);
    clientA = await registerClient(server.issuer, { client_name: 'App A' });
    clientB = await registerClient(server.issuer, { client_name: 'App B' });
    service = await registerClient(server.issuer, { client_name: 'Nightly sync', grant_types: ['client_credentials'], redirect_uris: [] },
      await initialAccessToken(server, user.workspaces[0]!.id));
    resourceServer = await adminCreateResourceServer(['--name', 'Data API gateway']);
  });

  after(async () => {
    await server?.stop();
  });

  it('a client introspects its own access and refresh tokens: active, with their claims', async () => {
    const tokens = await userTokens(clientA);
    const access = await introspectAs(as(clientA), tokens.access_token);
    expect(access).to.include({ active: true, client_id: clientA.client_id, sub: user.id, workspace_id: user.workspaces[0]!.id, role: 'member', aud: audience });
    expect(String(access.scope).split(' ').sort()).to.deep.equal(['api', 'profile']);

    const refresh = await introspectAs(as(clientA), tokens.refresh_token!);
    expect(refresh).to.include({ active: true, client_id: clientA.client_id, sub: user.id });

    const own = await introspectAs(as(service), await clientCredentialsToken());
    expect(own).to.include({ active: true, client_id: service.client_id, workspace_id: user.workspaces[0]!.id });
  });

  it("a user's access token is introspected with the role the user has now, as the data API reads it: a demotion shows at once", async () => {
    const demoted = await seedUser(server, [{ workspace: 'Demoted Co', role: 'member' }]);
    const workspaceId = demoted.workspaces[0]!.id;
    const { url, verifier } = codeRequest(server.issuer, clientA.client_id, { scope: 'api' });
    const callback = await authorize(new UserAgent(), url, server.origin, { email: demoted.email, password: demoted.password });
    const tokens = await (await exchangeCode(server.issuer, clientA, callback.searchParams.get('code')!, verifier)).json() as TokenSet;
    expect(await introspectAs(asResourceServer(), tokens.access_token)).to.include({ active: true, role: 'member' });

    const result = await server.admin(['member', 'set-role', '--email', demoted.email, '--workspace', workspaceId, '--role', 'viewer']);
    expect(result.code, result.stderr).to.equal(0);
    await eventually('the demotion in introspection', async () => (await introspectAs(asResourceServer(), tokens.access_token)).role === 'viewer', 5_000);
    expect(await introspectAs(as(clientA), tokens.access_token)).to.include({ active: true, role: 'viewer' });
  });

  it("another client gets exactly {\"active\":false} for A's access and refresh tokens, as for a token that does not exist", async () => {
    const tokens = await userTokens(clientA);
    await expectNothingRevealed(as(clientB), tokens.access_token, "A's access token");
    await expectNothingRevealed(as(clientB), tokens.refresh_token!, "A's refresh token");
    await expectNothingRevealed(as(clientA), await clientCredentialsToken(), "the service's client-credentials token");
    // Still A's to see.
    expect((await introspectAs(as(clientA), tokens.access_token)).active).to.equal(true);
    expect((await introspectAs(as(clientA), tokens.refresh_token!)).active).to.equal(true);
  });

  it('a public client introspects nothing, not even its own tokens (RFC 7662 section 2.1); discovery does not offer "none" there', async () => {
    const spa = await registerClient(server.issuer, { client_name: 'Public SPA', token_endpoint_auth_method: 'none' });
    expect(spa.client_secret).to.equal(undefined);
    const own = await userTokens(spa);
    const callAsSpa: Caller = { post: { client_id: spa.client_id } };
    await expectNothingRevealed(callAsSpa, own.access_token, 'its own access token');
    await expectNothingRevealed(callAsSpa, own.refresh_token!, 'its own refresh token');
    await expectNothingRevealed(callAsSpa, (await userTokens(clientA)).access_token, "A's access token");

    const metadata = await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>;
    expect(metadata.introspection_endpoint_auth_methods_supported).to.have.members(['client_secret_basic', 'client_secret_post', 'private_key_jwt']);
  });

  describe('a resource server the operator registered (admin resource-server create)', () => {
    it('is a confidential client with no grant and the data API as its introspection audience', () => {
      expect(resourceServer.client_id).to.match(/^cl_/);
      expect(resourceServer.client_secret).to.be.a('string').with.length.greaterThan(40);
      expect(resourceServer).to.include({ client_name: 'Data API gateway', token_endpoint_auth_method: 'client_secret_basic', introspection_audience: audience });
    });

    it("introspects users' access tokens meant for the data API, whichever client they were issued to (oauth4webapi, client_secret_basic)", async () => {
      const discovered = await oauth.processDiscoveryResponse(new URL(server.issuer), await oauth.discoveryRequest(new URL(server.issuer), insecure));
      const rs: oauth.Client = { client_id: resourceServer.client_id };
      for (const owner of [clientA, clientB]) {
        const tokens = await userTokens(owner);
        const response = await oauth.introspectionRequest(discovered, rs, oauth.ClientSecretBasic(resourceServer.client_secret), tokens.access_token, insecure);
        const result = await oauth.processIntrospectionResponse(discovered, rs, response);
        expect(result).to.include({ active: true, client_id: owner.client_id, sub: user.id, aud: audience, workspace_id: user.workspaces[0]!.id, role: 'member' });
      }
    });

    it('introspects client-credentials access tokens meant for the data API', async () => {
      const result = await introspectAs(asResourceServer(), await clientCredentialsToken());
      expect(result).to.include({ active: true, client_id: service.client_id, aud: audience, workspace_id: user.workspaces[0]!.id, scope: 'api' });
      expect(result).not.to.have.property('role');
    });

    it('never sees refresh tokens: they are for their own client alone', async () => {
      const tokens = await userTokens(clientA);
      await expectNothingRevealed(asResourceServer(), tokens.refresh_token!, "A's refresh token");
    });

    it('may authenticate with client_secret_post when created so; its wrong secret is 401 invalid_client', async () => {
      const posting = await adminCreateResourceServer(['--name', 'Posting gateway', '--auth-method', 'client_secret_post']);
      expect(posting.token_endpoint_auth_method).to.equal('client_secret_post');
      const token = await clientCredentialsToken();
      const postCaller: Caller = { post: { client_id: posting.client_id, client_secret: posting.client_secret } };
      expect(await introspectAs(postCaller, token)).to.include({ active: true, client_id: service.client_id });

      const wrong = await fetch(`${server.issuer}/oauth/introspect`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token, client_id: posting.client_id, client_secret: 'not-its-secret' }).toString(),
      });
      expect(wrong.status).to.equal(401);
      expect(await wrong.json()).to.deep.include({ error: 'invalid_client' });
    });

    it('gets no tokens of its own: it holds no grant type', async () => {
      const response = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api' },
        { authorization: `Basic ${Buffer.from(`${resourceServer.client_id}:${resourceServer.client_secret}`).toString('base64')}` });
      expect(response.status).to.equal(400);
      expect(await response.json()).to.deep.include({ error: 'unauthorized_client' });
    });
  });

  describe('a registrant cannot give itself the right', () => {
    it('introspection_audience in an RFC 7591 registration is ignored: not stored, no right', async () => {
      for (const iat of [undefined, await initialAccessToken(server, user.workspaces[0]!.id)]) {
        const response = await register(server.issuer, { client_name: 'Would-be gateway', introspection_audience: audience }, iat);
        expect(response.status, await response.clone().text()).to.equal(201);
        const registered = await response.json() as RegisteredClient;
        expect(registered).not.to.have.property('introspection_audience');

        const read = await fetch(registered.registration_client_uri, { headers: { authorization: `Bearer ${registered.registration_access_token}` } });
        expect(await read.json()).not.to.have.property('introspection_audience');
        const tokens = await userTokens(clientA);
        await expectNothingRevealed(as(registered), tokens.access_token, "A's access token");
        await expectNothingRevealed(as(registered), await clientCredentialsToken(), "the service's token");
      }
      const list = await server.admin(['client', 'list', '--json']);
      const stored = (JSON.parse(list.stdout) as Array<Record<string, unknown>>).filter((c) => c.client_name === 'Would-be gateway');
      expect(stored).to.have.length(2);
      for (const client of stored) expect(client.introspection_audience).to.equal(undefined);
      const gateway = (JSON.parse(list.stdout) as Array<Record<string, unknown>>).find((c) => c.client_id === resourceServer.client_id);
      expect(gateway?.introspection_audience).to.equal(audience);
    });

    it('introspection_audience in an RFC 7592 update is ignored: not stored, no right', async () => {
      const own = await registerClient(server.issuer, { client_name: 'Updating App' });
      const uri = own.registration_client_uri;
      const updated = await fetch(uri, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${own.registration_access_token}` },
        body: JSON.stringify({
          client_id: own.client_id,
          client_name: 'Updated App',
          redirect_uris: own.redirect_uris,
          grant_types: own.grant_types,
          token_endpoint_auth_method: 'client_secret_post',
          introspection_audience: audience,
        }),
      });
      expect(updated.status, await updated.clone().text()).to.equal(200);
      const body = await updated.json() as RegisteredClient;
      expect(body.client_name).to.equal('Updated App');
      expect(body).not.to.have.property('introspection_audience');

      const tokens = await userTokens(clientA);
      await expectNothingRevealed(as(own), tokens.access_token, "A's access token");
      const read = await fetch(uri, { headers: { authorization: `Bearer ${body.registration_access_token}` } });
      expect(await read.json()).not.to.have.property('introspection_audience');
    });
  });

  describe('revoked tokens are inactive for everyone', () => {
    const everyone = () => [as(clientA), as(clientB), asResourceServer()];

    it('a revoked refresh token, and the access tokens of its grant', async () => {
      const tokens = await userTokens(clientA);
      expect((await introspectAs(asResourceServer(), tokens.access_token)).active).to.equal(true);
      const revoked = await fetch(`${server.issuer}/oauth/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: tokens.refresh_token!, ...postCredentials(clientA) }).toString(),
      });
      expect(revoked.status).to.equal(200);
      for (const caller of everyone()) {
        expect(await introspectRaw(caller, tokens.refresh_token!)).to.equal(INACTIVE);
        expect(await introspectRaw(caller, tokens.access_token)).to.equal(INACTIVE);
      }
    });

    it('a revoked access token (user and client credentials)', async () => {
      const tokens = await userTokens(clientA);
      const machine = await clientCredentialsToken();
      for (const [token, owner] of [[tokens.access_token, clientA], [machine, service]] as const) {
        expect((await introspectAs(asResourceServer(), token)).active).to.equal(true);
        const revoked = await fetch(`${server.issuer}/oauth/revoke`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token, ...postCredentials(owner) }).toString(),
        });
        expect(revoked.status).to.equal(200);
        for (const caller of [...everyone(), as(service)]) expect(await introspectRaw(caller, token)).to.equal(INACTIVE);
      }
      // The refresh token of the user's grant was not revoked with its access token.
      expect((await introspectAs(as(clientA), tokens.refresh_token!)).active).to.equal(true);
    });
  });
});
