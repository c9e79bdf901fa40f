import { randomUUID } from 'node:crypto';

import { expect } from 'chai';
import { decodeJwt, SignJWT, UnsecuredJWT } from 'jose';
import * as openidClient from 'openid-client';

import { REDIRECT_URI, authorizationUrl, pkcePair, register, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { clientKey, type ClientKey } from '../support/keys.ts';

/**
 * Request objects (JAR, RFC 9101; OpenID Connect Core 6): an authorization request's parameters
 * inside a JWT the client signs with a key it registered, taken by value or pushed (RFC 9126);
 * never unsigned, never keyed with a client secret (stored hashed).
 */
describe('request objects (RFC 9101)', function () {
  this.timeout(60_000);
  let server: TestServer;
  let user: SeededUser;
  let key: ClientKey;
  let client: RegisteredClient;
  let config: openidClient.Configuration;

  before(async () => {
    server = await startServer();
    user = await seedUser(server);
    key = await clientKey();
    const response = await register(server.issuer, { client_name: 'Signed Requests App', jwks: { keys: [key.publicJwk] }, request_object_signing_alg: 'ES256' });
    expect(response.status, await response.clone().text()).to.equal(201);
    client = await response.json() as RegisteredClient;
    config = await openidClient.discovery(new URL(server.issuer), client.client_id, client.client_secret!, undefined, { execute: [openidClient.allowInsecureRequests] });
  });

  after(async () => {
    await server?.stop();
  });

  /** What the server sends the browser to for `url`, through sign-in and consent. */
  const signIn = (url: string) => authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });

  /** A request object as a client library signs one, with `claims` over the defaults. */
  function signedRequest(claims: Record<string, unknown>, signingKey: ClientKey = key): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: client.client_id, aud: server.issuer, client_id: client.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'openid api', iat: now, exp: now + 300, jti: randomUUID(), ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: signingKey.publicJwk.kid!, typ: 'oauth-authz-req+jwt' })
      .sign(signingKey.privateKey);
  }

  it('is advertised in discovery: request objects by value, signed with the asymmetric algorithms only', () => {
    const metadata = config.serverMetadata();
    expect(metadata.request_parameter_supported).to.equal(true);
    expect(metadata.request_object_signing_alg_values_supported).to.have.members(['ES256', 'PS256', 'EdDSA', 'RS256']);
    expect(metadata.request_uri_parameter_supported, 'a request_uri is only one this server issued (PAR)').to.equal(false);
  });

  it('takes a request object openid-client signs: the flow follows its parameters, its state and nonce come back, and the code redeems', async () => {
    const verifier = openidClient.randomPKCECodeVerifier();
    const state = openidClient.randomState();
    const nonce = openidClient.randomNonce();
    const url = await openidClient.buildAuthorizationUrlWithJAR(config, {
      redirect_uri: REDIRECT_URI, scope: 'openid api profile', state, nonce,
      code_challenge: await openidClient.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    }, { key: key.privateKey, kid: key.publicJwk.kid! });
    // Everything but client_id is inside the signed object.
    expect([...url.searchParams.keys()].sort()).to.deep.equal(['client_id', 'request']);
    const callback = await signIn(url.href);
    expect(callback.searchParams.get('state')).to.equal(state);
    const tokens = await openidClient.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
    expect(tokens.scope?.split(' ')).to.have.members(['openid', 'api', 'profile']);
    expect(decodeJwt(tokens.id_token!).nonce).to.equal(nonce);
  });

  it('takes a pushed request object (RFC 9126 section 3)', async () => {
    const { verifier, challenge } = pkcePair();
    const state = randomUUID();
    const pushed = await fetch(`${server.issuer}/oauth/par`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: client.client_id, client_secret: client.client_secret!,
        request: await signedRequest({ state, code_challenge: challenge, code_challenge_method: 'S256' }),
      }),
    });
    expect(pushed.status, await pushed.clone().text()).to.equal(201);
    const { request_uri: requestUri } = await pushed.json() as { request_uri: string };
    const callback = await signIn(authorizationUrl(server.issuer, { client_id: client.client_id, request_uri: requestUri }));
    expect(callback.searchParams.get('state')).to.equal(state);
    const tokens = await openidClient.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.access_token).to.be.a('string');
  });

  it('refuses, and uses nothing of, a request object unsigned, signed with a key the client did not register, or naming another client', async () => {
    const { challenge } = pkcePair();
    const pkce = { code_challenge: challenge, code_challenge_method: 'S256' };
    const now = Math.floor(Date.now() / 1000);
    const refused: Record<string, string> = {
      unsigned: new UnsecuredJWT({ iss: client.client_id, aud: server.issuer, client_id: client.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'openid api', iat: now, exp: now + 300, ...pkce }).encode(),
      'another key': await signedRequest(pkce, await clientKey()),
      'another client': await signedRequest({ ...pkce, client_id: 'cl_someone_else', iss: 'cl_someone_else' }),
      expired: await signedRequest({ ...pkce, iat: now - 3600, exp: now - 1800 }),
    };
    for (const [name, request] of Object.entries(refused)) {
      const { url, response } = await new UserAgent().follow(authorizationUrl(server.issuer, { client_id: client.client_id, response_type: 'code', scope: 'openid api', request }), server.origin);
      const page = await response.text();
      // An error page: the redirect URI inside an object that does not check out is not to be trusted, and no sign-in is asked for.
      expect(url.startsWith(server.origin), `${name}: stays on this server`).to.equal(true);
      expect(response.status, name).to.equal(400);
      expect(page, name).to.include('Error code: <code>invalid_request_object</code>');
      expect(page, name).to.not.match(/name="password"/);
    }
  });

  it('holds a client registered with require_signed_request_object to it: a plain authorization request is refused, a signed one goes through', async () => {
    const strictKey = await clientKey();
    const registered = await register(server.issuer, { client_name: 'Strict App', jwks: { keys: [strictKey.publicJwk] }, request_object_signing_alg: 'ES256', require_signed_request_object: true });
    expect(registered.status, await registered.clone().text()).to.equal(201);
    const strict = await registered.json() as RegisteredClient;
    expect(strict).to.include({ require_signed_request_object: true });
    const { challenge } = pkcePair();
    const pkce = { code_challenge: challenge, code_challenge_method: 'S256' };
    const plain = await new UserAgent().follow(authorizationUrl(server.issuer, { client_id: strict.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api', state: 's', ...pkce }), server.origin);
    expect(plain.url.startsWith(server.origin)).to.equal(true);
    const plainPage = await plain.response.text();
    // Held on a page for a client that registered itself (RFC 9700 section 4.11.2), saying why.
    expect(plainPage).to.include('Request Object must be used by this client');
    expect(plain.response.status).to.equal(400);

    const now = Math.floor(Date.now() / 1000);
    const request = await new SignJWT({ iss: strict.client_id, aud: server.issuer, client_id: strict.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api', state: 'signed', iat: now, exp: now + 300, ...pkce })
      .setProtectedHeader({ alg: 'ES256', kid: strictKey.publicJwk.kid! }).sign(strictKey.privateKey);
    const callback = await signIn(authorizationUrl(server.issuer, { client_id: strict.client_id, request }));
    expect(callback.searchParams.get('state')).to.equal('signed');
    expect(callback.searchParams.get('code')).to.be.a('string');
  });

  it('refuses at registration a request object algorithm it does not take: none, and HS256 (client secrets are stored hashed)', async () => {
    for (const alg of ['none', 'HS256']) {
      const response = await register(server.issuer, { client_name: `Unsigned ${alg}`, request_object_signing_alg: alg });
      expect(response.status, alg).to.equal(400);
      expect(await response.json()).to.include({ error: 'invalid_client_metadata' });
    }
  });
});
