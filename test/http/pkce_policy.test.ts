import { expect } from 'chai';
import { decodeJwt } from 'jose';

import { codeRequest, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * PKCE_REQUIRED: `all` (the default) asks every authorization request for PKCE; `public` lets a
 * confidential client's OpenID Connect request omit it (RFC 9700 2.1.1), as the OpenID
 * Foundation's conformance plans do, and keeps it required everywhere else.
 */
describe('PKCE policy', function () {
  this.timeout(30_000);

  let server: TestServer;
  let defaultServer: TestServer;
  let user: SeededUser;
  let confidential: RegisteredClient;
  let publicClient: RegisteredClient;

  before(async () => {
    server = await startServer({ env: { PKCE_REQUIRED: 'public' } });
    defaultServer = await startServer();
    user = await seedUser(server);
    // Vetted, so the engine's error answers reach the redirect URI (src/http/endpoints/authorization.ts holds them for the others).
    confidential = await registerVettedClient(server, { token_endpoint_auth_method: 'client_secret_basic' });
    publicClient = await registerVettedClient(server, { token_endpoint_auth_method: 'none' });
  });

  after(async () => {
    await server?.stop();
    await defaultServer?.stop();
  });

  /** Where the authorization request ends: the client's redirect URI, with a code or an error. */
  const authorizeWith = (target: TestServer, clientId: string, overrides: Record<string, string | undefined>) =>
    authorize(new UserAgent(), codeRequest(target.issuer, clientId, overrides).url, target.origin, { email: user.email, password: user.password });

  const basic = (client: RegisteredClient) => ({ authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}` });

  it('with PKCE_REQUIRED=public, gives a confidential client\'s OpenID Connect request without PKCE a code, with or without a nonce', async () => {
    for (const nonce of [undefined, 'n-0S6_WzA2Mj']) {
      const callback = await authorizeWith(server, confidential.client_id, { scope: 'openid', code_challenge: undefined, code_challenge_method: undefined, nonce });
      const code = callback.searchParams.get('code');
      expect(code, callback.href).to.be.a('string');
      const response = await tokenRequest(server.issuer, { grant_type: 'authorization_code', code: code!, redirect_uri: callback.origin + callback.pathname }, basic(confidential));
      expect(response.status).to.equal(200);
      const { id_token: idToken } = await response.json() as { id_token: string };
      expect(decodeJwt(idToken).nonce).to.equal(nonce);
    }
  });

  it('with PKCE_REQUIRED=public, still requires PKCE of a plain OAuth request and of a public client', async () => {
    const plainOAuth = await authorizeWith(server, confidential.client_id, { scope: 'api', code_challenge: undefined, code_challenge_method: undefined });
    expect(plainOAuth.searchParams.get('error')).to.equal('invalid_request');
    expect(plainOAuth.searchParams.get('error_description')).to.match(/PKCE/);
    const publicOpenId = await authorizeWith(server, publicClient.client_id, { scope: 'openid', code_challenge: undefined, code_challenge_method: undefined });
    expect(publicOpenId.searchParams.get('error')).to.equal('invalid_request');
  });

  it('with PKCE_REQUIRED=public, refuses plain, and a code whose challenge is redeemed without the verifier', async () => {
    const plain = await authorizeWith(server, confidential.client_id, { scope: 'openid', code_challenge_method: 'plain' });
    expect(plain.searchParams.get('error')).to.equal('invalid_request');
    const withChallenge = await authorizeWith(server, confidential.client_id, { scope: 'openid' });
    const code = withChallenge.searchParams.get('code')!;
    const withoutVerifier = await tokenRequest(server.issuer, { grant_type: 'authorization_code', code, redirect_uri: withChallenge.origin + withChallenge.pathname }, basic(confidential));
    expect(withoutVerifier.status).to.equal(400);
    expect((await withoutVerifier.json() as { error: string }).error).to.equal('invalid_grant');
  });

  it('answers prompt=none without a session with login_required, not a PKCE error', async () => {
    const { url } = codeRequest(server.issuer, confidential.client_id, { scope: 'openid', prompt: 'none', code_challenge: undefined, code_challenge_method: undefined });
    const { url: landed } = await new UserAgent().follow(url, server.origin);
    expect(new URL(landed).searchParams.get('error')).to.equal('login_required');
  });

  it('by default (PKCE_REQUIRED=all), requires PKCE of every request, OpenID Connect ones of confidential clients included', async () => {
    const client = await registerVettedClient(defaultServer, { token_endpoint_auth_method: 'client_secret_basic' });
    const defaultUser = await seedUser(defaultServer);
    const callback = await authorize(new UserAgent(), codeRequest(defaultServer.issuer, client.client_id, { scope: 'openid', code_challenge: undefined, code_challenge_method: undefined }).url,
      defaultServer.origin, { email: defaultUser.email, password: defaultUser.password });
    expect(callback.searchParams.get('error')).to.equal('invalid_request');
    expect(callback.searchParams.get('error_description')).to.match(/PKCE/);
  });
});
