import { expect } from 'chai';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';

import { REDIRECT_URI, codeRequest, exchangeCode, introspect, postCredentials, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * Revocation (RFC 7009), introspection (RFC 7662) and the userinfo endpoint (OpenID Connect Core
 * 5.3), against the real server process: tokens come from real authorization code flows (login
 * and consent over HTTP) and the token endpoint.
 */

interface TokenSet {
  access_token: string;
  refresh_token?: string;
  id_token?: string;
  token_type: string;
  expires_in: number;
  scope?: string;
}

interface OAuthErrorBody {
  error?: string;
  error_description?: string;
}

const insecure = { [oauth.allowInsecureRequests]: true } as const;

/** The same token with one character in the middle of its signature changed. */
function tamperSignature(jwt: string): string {
  const [header, payload, signature] = jwt.split('.') as [string, string, string];
  const at = Math.floor(signature.length / 2);
  const flipped = signature[at] === 'A' ? 'B' : 'A';
  return `${header}.${payload}.${signature.slice(0, at)}${flipped}${signature.slice(at + 1)}`;
}

async function postForm(url: string, form: Record<string, string>): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
}

describe('revocation, introspection and userinfo', function () {
  this.timeout(30_000);

  let server: TestServer;
  let as: oauth.AuthorizationServer;
  let user: SeededUser;
  let client: RegisteredClient;
  let otherClient: RegisteredClient;

  const introspectUrl = () => `${server.issuer}/oauth/introspect`;
  const revokeUrl = () => `${server.issuer}/oauth/revoke`;
  const userinfoUrl = () => `${server.issuer}/oauth/userinfo`;

  /** Logs the user in, consents, and exchanges the code at the token endpoint. */
  async function userTokens(scope: string, options: { forClient?: RegisteredClient; who?: SeededUser; workspace?: string } = {}): Promise<TokenSet> {
    const owner = options.forClient ?? client;
    const who = options.who ?? user;
    const { url, state, verifier } = codeRequest(server.issuer, owner.client_id, { scope });
    const callback = await authorize(new UserAgent(), url, server.origin, {
      email: who.email,
      password: who.password,
      ...(options.workspace ? { workspace: options.workspace } : {}),
    });
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`authorization did not give a code: ${callback.href}`);
    expect(callback.searchParams.get('state')).to.equal(state);
    const response = await exchangeCode(server.issuer, owner, code, verifier);
    const body = await response.json() as TokenSet & OAuthErrorBody;
    if (response.status !== 200) throw new Error(`code exchange failed ${response.status}: ${JSON.stringify(body)}`);
    return body;
  }

  /** Introspection by the primary client. */
  const introspectAsClient = (token: string) => introspect(server.issuer, postCredentials(client), token);

  async function callUserinfo(token?: string): Promise<Response> {
    return fetch(userinfoUrl(), { headers: token ? { authorization: `Bearer ${token}` } : {} });
  }

  /** A revoked access token: introspection says inactive and userinfo answers 401 invalid_token. */
  async function expectRevoked(accessToken: string): Promise<void> {
    expect(await introspectAsClient(accessToken)).to.deep.equal({ active: false });
    const userinfo = await callUserinfo(accessToken);
    expect(userinfo.status).to.equal(401);
    expect(userinfo.headers.get('www-authenticate')).to.match(/^Bearer /).and.to.contain('error="invalid_token"');
  }

  before(async () => {
    server = await startServer();
    as = await oauth.processDiscoveryResponse(
      new URL(server.issuer),
      await oauth.discoveryRequest(new URL(server.issuer), { algorithm: 'oidc', ...insecure }),
    );
    user = await seedUser(server, [{ workspace: 'Acme', role: 'admin' }]);
    client = await registerClient(server.issuer, { client_name: 'Primary App' });
    otherClient = await registerClient(server.issuer, { client_name: 'Other App' });
  });

  after(async () => {
    await server?.stop();
  });

  describe('introspection (RFC 7662)', () => {
    it('describes a JWT access token as active, with client_id, sub, scope, exp and workspace_id (oauth4webapi)', async () => {
      const tokens = await userTokens('api profile');
      const response = await oauth.introspectionRequest(as, { client_id: client.client_id }, oauth.ClientSecretPost(client.client_secret!), tokens.access_token, insecure);
      expect(response.headers.get('cache-control')).to.contain('no-store');
      const result = await oauth.processIntrospectionResponse(as, { client_id: client.client_id }, response);
      expect(result.active).to.equal(true);
      expect(result.client_id).to.equal(client.client_id);
      expect(result.sub).to.equal(user.id);
      expect((result.scope ?? '').split(' ').sort()).to.deep.equal(['api', 'profile']);
      expect(result.exp).to.be.a('number');
      const now = Math.floor(Date.now() / 1000);
      expect(result.exp!).to.be.greaterThan(now).and.at.most(now + 3600 + 5);
      expect(result.workspace_id).to.equal(user.workspaces[0]!.id);
    });

    it('describes a refresh token as active, with its client_id', async () => {
      const tokens = await userTokens('api');
      expect(tokens.refresh_token).to.be.a('string');
      const result = await introspectAsClient(tokens.refresh_token!);
      expect(result.active).to.equal(true);
      expect(result.client_id).to.equal(client.client_id);
      expect(result.sub).to.equal(user.id);
    });

    it('answers active: false for garbage, and for a JWT whose signature was tampered with', async () => {
      expect(await introspectAsClient('not-a-token-this-server-issued')).to.deep.equal({ active: false });
      const tokens = await userTokens('api');
      expect(await introspectAsClient(tamperSignature(tokens.access_token))).to.deep.equal({ active: false });
    });

    it('refuses a client with wrong credentials: 401 invalid_client', async () => {
      const tokens = await userTokens('api');
      const response = await postForm(introspectUrl(), { token: tokens.access_token, client_id: client.client_id, client_secret: 'wrong-secret' });
      expect(response.status).to.equal(401);
      const body = await response.json() as OAuthErrorBody;
      expect(body.error).to.equal('invalid_client');
      expect(body).not.to.have.property('active');
    });
  });

  describe('revocation (RFC 7009)', () => {
    it('revoking the refresh token revokes the grant: refresh fails, the JWT access token becomes inactive and userinfo refuses it (oauth4webapi)', async () => {
      const tokens = await userTokens('api profile');
      // Active until the grant is revoked.
      expect((await introspectAsClient(tokens.access_token)).active).to.equal(true);
      expect((await callUserinfo(tokens.access_token)).status).to.equal(200);

      const response = await oauth.revocationRequest(as, { client_id: client.client_id }, oauth.ClientSecretPost(client.client_secret!), tokens.refresh_token!, insecure);
      expect(response.status).to.equal(200);
      await oauth.processRevocationResponse(response);

      const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, ...postCredentials(client) });
      expect(refreshed.status).to.equal(400);
      expect((await refreshed.json() as OAuthErrorBody).error).to.equal('invalid_grant');

      await expectRevoked(tokens.access_token);
    });

    it('revoking a JWT access token makes it inactive and userinfo answers 401 invalid_token', async () => {
      const tokens = await userTokens('api profile');
      expect((await introspectAsClient(tokens.access_token)).active).to.equal(true);

      const response = await postForm(revokeUrl(), { token: tokens.access_token, token_type_hint: 'access_token', ...postCredentials(client) });
      expect(response.status).to.equal(200);

      await expectRevoked(tokens.access_token);
    });

    it("does not let another client revoke someone else's tokens: a confidential client is refused, a public one changes nothing", async () => {
      const tokens = await userTokens('api');

      // RFC 7009 section 2.1: "the request is refused", for an access token as for a refresh token.
      for (const [what, token] of [['access token', tokens.access_token], ['refresh token', tokens.refresh_token!]] as const) {
        const attempt = await postForm(revokeUrl(), { token, ...postCredentials(otherClient) });
        const body = await attempt.json() as OAuthErrorBody;
        expect([attempt.status, body.error], `${what}: ${body.error_description}`).to.deep.equal([400, 'invalid_request']);
        expect(body.error_description, what).to.equal('client is not authorized to revoke the presented token');
        expect(attempt.headers.get('cache-control'), what).to.equal('no-store');
      }
      // A public client's id proves nothing: it is not told whether someone else's token is valid.
      const publicClient = await registerClient(server.issuer, { client_name: 'Public App', token_endpoint_auth_method: 'none' });
      for (const token of [tokens.access_token, tokens.refresh_token!]) {
        const attempt = await postForm(revokeUrl(), { token, client_id: publicClient.client_id });
        expect([attempt.status, await attempt.json()]).to.deep.equal([200, {}]);
      }

      const stillActive = await introspectAsClient(tokens.access_token);
      expect(stillActive.active).to.equal(true);
      expect(stillActive.client_id).to.equal(client.client_id);
      expect((await introspectAsClient(tokens.refresh_token!)).active).to.equal(true);
      const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, ...postCredentials(client) });
      expect(refreshed.status).to.equal(200);
    });

    it("answers another client 200 for a rotated-out refresh token, as for any invalid one, whether or not its grant is still live (RFC 7009 section 2.2)", async () => {
      const tokens = await userTokens('api');
      const rotated = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, ...postCredentials(client) });
      expect(rotated.status).to.equal(200);
      const attempt = await postForm(revokeUrl(), { token: tokens.refresh_token!, ...postCredentials(otherClient) });
      expect([attempt.status, await attempt.json()]).to.deep.equal([200, {}]);
      // And it changed nothing: the grant's current refresh token still works.
      const { refresh_token: current } = await rotated.json() as { refresh_token: string };
      expect((await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: current, ...postCredentials(client) })).status).to.equal(200);
    });

    it('answers 200 for a token it does not know', async () => {
      const response = await postForm(revokeUrl(), { token: 'unknown-token-value', ...postCredentials(client) });
      expect(response.status).to.equal(200);
      const jwtShaped = await postForm(revokeUrl(), { token: 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl', ...postCredentials(client) });
      expect(jwtShaped.status).to.equal(200);
    });

    it('answers every successful revocation the same way, 200 application/json {}, so every client library parses it', async () => {
      const tokens = await userTokens('api');
      const cases: Record<string, string> = {
        'a refresh token': tokens.refresh_token!,
        'a JWT access token': (await userTokens('api')).access_token,
        'an unknown token': 'unknown-token-value',
        'a JWT the server did not issue': 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl',
      };
      for (const [what, token] of Object.entries(cases)) {
        const response = await postForm(revokeUrl(), { token, ...postCredentials(client) });
        expect(response.status, what).to.equal(200);
        expect(response.headers.get('content-type'), what).to.match(/^application\/json/);
        expect(await response.json(), what).to.deep.equal({});
      }
    });

    it('refuses a client with wrong credentials: 401 invalid_client', async () => {
      const tokens = await userTokens('api');
      const response = await postForm(revokeUrl(), { token: tokens.access_token, client_id: client.client_id, client_secret: 'wrong-secret' });
      expect(response.status).to.equal(401);
      expect((await response.json() as OAuthErrorBody).error).to.equal('invalid_client');
      expect((await introspectAsClient(tokens.access_token)).active).to.equal(true);
    });
  });

  describe('userinfo', () => {
    let multi: SeededUser;

    before(async () => {
      multi = await seedUser(server, [{ workspace: 'Acme Two', role: 'admin' }, { workspace: 'Globex', role: 'viewer' }]);
    });

    it('answers a profile token with the user and the consented workspace, no-store', async () => {
      const globex = multi.workspaces[1]!;
      const tokens = await userTokens('api profile', { who: multi, workspace: globex.id });
      const response = await callUserinfo(tokens.access_token);
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.match(/^application\/json/);
      expect(response.headers.get('cache-control')).to.contain('no-store');
      const body = await response.json() as Record<string, unknown>;
      expect(body.sub).to.equal(multi.id);
      expect(body.name).to.equal(multi.name);
      expect(body.email).to.equal(multi.email);
      expect(body.given_name).to.equal('Test');
      expect(body.family_name).to.be.a('string').and.not.equal('');
      expect(multi.name).to.equal(`${String(body.given_name)} ${String(body.family_name)}`);
      expect(body.workspace).to.deep.equal({ id: globex.id, name: 'Globex', role: 'viewer' });
    });

    it('refuses a token with only api: 403 insufficient_scope', async () => {
      const tokens = await userTokens('api');
      const response = await callUserinfo(tokens.access_token);
      expect(response.status).to.equal(403);
      expect(response.headers.get('www-authenticate')).to.match(/^Bearer /).and.to.contain('error="insufficient_scope"');
      expect(await response.json()).not.to.have.property('sub');
    });

    it('refuses a client_credentials token with 401 invalid_token, not insufficient_scope: no scope would give it a user to describe', async () => {
      const machine = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
      const issued = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', ...postCredentials(machine) });
      const { access_token: accessToken } = await issued.json() as TokenSet;
      const response = await callUserinfo(accessToken);
      const body = await response.json() as OAuthErrorBody;
      expect([response.status, body.error]).to.deep.equal([401, 'invalid_token']);
      expect(body.error_description).to.match(/not tied to a user/);
      expect(response.headers.get('www-authenticate')).to.include('error="invalid_token"').and.not.include('scope=');
    });

    it('accepts the token in a POST form body (RFC 6750 2.2), and refuses it sent twice or its parameter repeated with 400 invalid_request', async () => {
      const tokens = await userTokens('api profile');
      const fromForm = await postForm(userinfoUrl(), { access_token: tokens.access_token });
      expect(fromForm.status).to.equal(200);
      expect(await fromForm.json()).to.deep.equal(await (await callUserinfo(tokens.access_token)).json());
      const twice = await fetch(userinfoUrl(), {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ access_token: tokens.access_token }).toString(),
      });
      expect(twice.status).to.equal(400);
      expect((await twice.json() as OAuthErrorBody).error).to.equal('invalid_request');
      // RFC 6750 section 3: the refusal names its error in the challenge too.
      expect(twice.headers.get('www-authenticate')).to.include('error="invalid_request"');
      const repeated = await fetch(userinfoUrl(), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `access_token=${tokens.access_token}&access_token=${tokens.access_token}`,
      });
      expect(repeated.status, 'the parameter repeated (RFC 6750 section 3.1)').to.equal(400);
      expect((await repeated.json() as OAuthErrorBody).error).to.equal('invalid_request');
      // The query string is not a way in: tokens in URLs end up in logs.
      expect((await fetch(`${userinfoUrl()}?access_token=${tokens.access_token}`)).status).to.equal(401);
    });

    it('can be called from a browser on another origin: preflight answered, every answer readable, no credentials mode', async () => {
      const preflight = await fetch(userinfoUrl(), {
        method: 'OPTIONS',
        headers: { origin: 'https://spa.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
      });
      expect(preflight.status).to.equal(204);
      expect(preflight.headers.get('access-control-allow-origin')).to.equal('*');
      expect(preflight.headers.get('access-control-allow-headers')!.toLowerCase()).to.include('authorization');
      expect(preflight.headers.get('access-control-allow-credentials')).to.equal(null);
      const tokens = await userTokens('api profile');
      for (const token of [tokens.access_token, undefined]) {
        const response = await fetch(userinfoUrl(), { headers: { origin: 'https://spa.example', ...(token ? { authorization: `Bearer ${token}` } : {}) } });
        expect(response.headers.get('access-control-allow-origin')).to.equal('*');
        expect(response.headers.get('access-control-expose-headers')).to.include('WWW-Authenticate');
      }
    });

    it('refuses a request without a token: 401 with WWW-Authenticate: Bearer', async () => {
      const response = await callUserinfo();
      expect(response.status).to.equal(401);
      const challenge = response.headers.get('www-authenticate');
      expect(challenge).to.match(/^Bearer\b/);
      // RFC 6750 section 3.1: no error code when the request carried no authentication.
      expect(challenge).not.to.contain('error=');
    });

    it('refuses a token whose signature was tampered with: 401 invalid_token', async () => {
      const tokens = await userTokens('api profile');
      expect((await callUserinfo(tokens.access_token)).status).to.equal(200);
      const response = await callUserinfo(tamperSignature(tokens.access_token));
      expect(response.status).to.equal(401);
      expect(response.headers.get('www-authenticate')).to.match(/^Bearer /).and.to.contain('error="invalid_token"');
      expect(await response.json()).not.to.have.property('sub');
    });

    it('refuses a client_credentials token, which is tied to no user', async () => {
      const workspaceId = user.workspaces[0]!.id;
      const service = await registerClient(server.issuer, { client_name: 'Service', grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, workspaceId));
      const response = await oauth.clientCredentialsGrantRequest(as, { client_id: service.client_id }, oauth.ClientSecretPost(service.client_secret!), { scope: 'api' }, insecure);
      const tokens = await oauth.processClientCredentialsResponse(as, { client_id: service.client_id }, response);
      expect(decodeJwt(tokens.access_token).workspace_id).to.equal(workspaceId);

      const userinfo = await callUserinfo(tokens.access_token);
      expect([401, 403]).to.include(userinfo.status);
      expect(userinfo.headers.get('www-authenticate')).to.match(/^Bearer /);
      const body = await userinfo.json() as Record<string, unknown>;
      expect(body).not.to.have.property('sub');
      expect(body.error).to.be.oneOf(['invalid_token', 'insufficient_scope']);
    });

    it('with openid profile api, the userinfo sub equals the ID token sub (oauth4webapi end to end)', async () => {
      const oidcClient = await registerClient(server.issuer, { client_name: 'OIDC App' });
      const c: oauth.Client = { client_id: oidcClient.client_id };
      const auth = oauth.ClientSecretPost(oidcClient.client_secret!);
      const verifier = oauth.generateRandomCodeVerifier();
      const state = oauth.generateRandomState();
      const nonce = oauth.generateRandomNonce();
      const url = new URL(as.authorization_endpoint!);
      url.search = new URLSearchParams({
        client_id: c.client_id,
        response_type: 'code',
        redirect_uri: REDIRECT_URI,
        scope: 'openid profile api',
        state,
        nonce,
        code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      }).toString();
      const callback = await authorize(new UserAgent(), url.href, server.origin, { email: user.email, password: user.password });
      const params = oauth.validateAuthResponse(as, c, callback, state);
      const tokenResponse = await oauth.authorizationCodeGrantRequest(as, c, auth, params, REDIRECT_URI, verifier, insecure);
      const tokens = await oauth.processAuthorizationCodeResponse(as, c, tokenResponse, { expectedNonce: nonce, requireIdToken: true });
      const idToken = oauth.getValidatedIdTokenClaims(tokens)!;
      expect(idToken.sub).to.equal(user.id);

      const response = await oauth.userInfoRequest(as, c, tokens.access_token, insecure);
      expect(response.headers.get('cache-control')).to.contain('no-store');
      const info = await oauth.processUserInfoResponse(as, c, idToken.sub, response);
      expect(info.sub).to.equal(idToken.sub);
      expect(info.email).to.equal(user.email);
      expect(info.name).to.equal(user.name);
      expect(info.workspace).to.deep.equal({ id: user.workspaces[0]!.id, name: 'Acme', role: 'admin' });
    });
  });
});
