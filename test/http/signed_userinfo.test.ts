import { expect } from 'chai';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';

import { REDIRECT_URI, codeRequest, exchangeCode, register, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * Signed userinfo responses (OpenID Connect Core 5.3.2; the conformance module
 * oidcc-userinfo-rs256): a client that registered `userinfo_signed_response_alg` gets its userinfo
 * claims as a JWT signed with the OP's published keys; every other client keeps getting JSON.
 */
describe('signed userinfo responses', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;
  let discovery: Record<string, unknown>;
  let keys: ReturnType<typeof createRemoteJWKSet>;

  before(async function () {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Signed Co' }]);
    discovery = await (await fetch(`${server.issuer}/.well-known/openid-configuration`)).json() as Record<string, unknown>;
    keys = createRemoteJWKSet(new URL(String(discovery.jwks_uri)));
  });

  after(async function () {
    await server?.stop();
  });

  /** An access token for the seeded user, through the code flow (with a nonce when it is an OpenID request). */
  async function accessToken(client: RegisteredClient, scope = 'openid profile'): Promise<string> {
    const nonce = scope.split(' ').includes('openid') ? 'nonce-for-the-id-token' : undefined;
    const auth = codeRequest(server.issuer, client.client_id, { scope, nonce });
    const callback = await authorize(new UserAgent(), auth.url, server.origin, user);
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`no code: ${callback.href}`);
    const response = await exchangeCode(server.issuer, client, code, auth.verifier);
    expect(response.status).to.equal(200);
    return (await response.json() as { access_token: string }).access_token;
  }

  function callUserinfo(token: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`${server.issuer}/oauth/userinfo`, { ...init, headers: { authorization: `Bearer ${token}`, ...init.headers } });
  }

  /** What a client that did not ask for signed responses gets for the same user and scope. */
  async function jsonClaims(scope = 'openid profile'): Promise<Record<string, unknown>> {
    const response = await callUserinfo(await accessToken(await registerClient(server.issuer), scope));
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    return response.json() as Promise<Record<string, unknown>>;
  }

  /** Checks a signed answer and returns its claims without iss, aud, iat and exp. */
  async function verifiedClaims(response: Response, client: RegisteredClient, alg: string): Promise<Record<string, unknown>> {
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.equal('application/jwt');
    expect(response.headers.get('cache-control')).to.equal('no-store');
    const jwt = await response.text();
    const { payload, protectedHeader } = await jwtVerify(jwt, keys, { issuer: server.issuer, audience: client.client_id, algorithms: [alg] });
    const published = (await (await fetch(String(discovery.jwks_uri))).json() as { keys: Array<{ kid: string; alg?: string }> }).keys;
    expect(published.map((key) => key.kid)).to.include(protectedHeader.kid);
    expect(payload.aud).to.equal(client.client_id);
    expect(payload).to.not.have.property('nonce');
    expect(payload.iat).to.be.a('number');
    const { iss: _iss, aud: _aud, iat: _iat, exp: _exp, ...claims }: JWTPayload = payload;
    return claims;
  }

  it('lists the algorithms the server signs userinfo responses with in discovery', function () {
    expect(discovery.userinfo_signing_alg_values_supported).to.have.members(['RS256', 'ES256']);
  });

  for (const alg of ['RS256', 'ES256']) {
    it(`answers a client registered with userinfo_signed_response_alg=${alg} with a JWT signed ${alg} by the published keys, carrying the JSON answer's claims`, async function () {
      const client = await registerClient(server.issuer, { userinfo_signed_response_alg: alg });
      expect(client.userinfo_signed_response_alg).to.equal(alg);
      const token = await accessToken(client);

      const claims = await verifiedClaims(await callUserinfo(token), client, alg);
      expect(claims.sub).to.equal(user.id);
      expect(claims.name).to.equal(user.name);
      expect(claims).to.deep.equal(await jsonClaims());

      // POST, with the token in the form body, is signed too; CORS is as for JSON answers.
      const posted = await fetch(`${server.issuer}/oauth/userinfo`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://app.example' },
        body: new URLSearchParams({ access_token: token }),
      });
      expect(posted.headers.get('access-control-allow-origin')).to.equal('*');
      expect(await verifiedClaims(posted, client, alg)).to.deep.equal(claims);
    });
  }

  it('signs only the claims the token releases (openid alone: sub)', async function () {
    const client = await registerClient(server.issuer, { userinfo_signed_response_alg: 'RS256' });
    const claims = await verifiedClaims(await callUserinfo(await accessToken(client, 'openid')), client, 'RS256');
    expect(claims).to.deep.equal({ sub: user.id });
  });

  it('keeps answering JSON to a client that did not ask for signed responses', async function () {
    const client = await registerClient(server.issuer);
    expect(client).to.not.have.property('userinfo_signed_response_alg');
    const response = await callUserinfo(await accessToken(client));
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    const body = await response.json() as Record<string, unknown>;
    expect(body.sub).to.equal(user.id);
    expect(body).to.not.have.property('iss');
    expect(body).to.not.have.property('aud');
  });

  it('keeps the errors JSON with WWW-Authenticate for a client that asked for signed responses', async function () {
    const client = await registerClient(server.issuer, { userinfo_signed_response_alg: 'RS256' });
    const apiOnly = await callUserinfo(await accessToken(client, 'api'));
    expect(apiOnly.status).to.equal(403);
    expect(apiOnly.headers.get('content-type')).to.match(/^application\/json/);
    expect(apiOnly.headers.get('www-authenticate')).to.match(/^Bearer .*error="insufficient_scope"/);
    expect((await apiOnly.json() as { error: string }).error).to.equal('insufficient_scope');

    const invalid = await callUserinfo('not-a-token');
    expect(invalid.status).to.equal(401);
    expect(invalid.headers.get('www-authenticate')).to.match(/^Bearer .*error="invalid_token"/);
    expect((await invalid.json() as { error: string }).error).to.equal('invalid_token');
  });

  for (const alg of ['HS256', 'none', 'PS384', 'RS512']) {
    it(`refuses to register userinfo_signed_response_alg=${alg} (400 invalid_client_metadata)`, async function () {
      const response = await register(server.issuer, { userinfo_signed_response_alg: alg });
      expect(response.status, await response.clone().text()).to.equal(400);
      expect((await response.json() as { error: string }).error).to.equal('invalid_client_metadata');
    });
  }

  it('signs once an RFC 7592 update adds the setting, within the client cache bound', async function () {
    const client = await registerClient(server.issuer);
    const token = await accessToken(client);
    expect((await callUserinfo(token)).headers.get('content-type')).to.match(/^application\/json/);

    const update = await fetch(client.registration_client_uri, {
      method: 'PUT',
      headers: { authorization: `Bearer ${client.registration_access_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        client_id: client.client_id,
        client_name: client.client_name,
        redirect_uris: [REDIRECT_URI],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_post',
        userinfo_signed_response_alg: 'RS256',
      }),
    });
    expect(update.status, await update.clone().text()).to.equal(200);
    expect((await update.json() as Record<string, unknown>).userinfo_signed_response_alg).to.equal('RS256');

    const deadline = Date.now() + 3000;
    let response = await callUserinfo(token);
    while (response.headers.get('content-type') !== 'application/jwt' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      response = await callUserinfo(token);
    }
    const claims = await verifiedClaims(response, client, 'RS256');
    expect(claims.sub).to.equal(user.id);
    expect(decodeProtectedHeader(await (await callUserinfo(token)).text()).alg).to.equal('RS256');
  });
});
