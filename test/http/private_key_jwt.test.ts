import { randomUUID } from 'node:crypto';

import { expect } from 'chai';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import * as oauth from 'oauth4webapi';

import { REDIRECT_URI, codeRequest, register, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { expectOAuthError } from '../support/oauth_errors.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

const insecure = { [oauth.allowInsecureRequests]: true };

interface ClientKey {
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function clientKey(alg = 'ES256'): Promise<ClientKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, publicJwk: { ...await exportJWK(publicKey), alg, use: 'sig', kid: randomUUID() } };
}

/** A client assertion (RFC 7523) as a client library makes one; `claims` override the defaults. */
function assertion(client: RegisteredClient, key: ClientKey, audience: string | string[], claims: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ jti: randomUUID(), iss: client.client_id, sub: client.client_id, aud: audience, iat: now, exp: now + 60, ...claims })
    .setProtectedHeader({ alg: key.publicJwk.alg!, kid: key.publicJwk.kid! })
    .sign(key.privateKey);
}

/** Client authentication with private_key_jwt (RFC 7523), keys registered inline. */
describe('private_key_jwt client authentication', function () {
  this.timeout(60_000);
  let server: TestServer;
  /** Another instance on the same store, behind the same issuer. */
  let other: TestServer;
  let user: SeededUser;
  let key: ClientKey;
  let client: RegisteredClient;
  let as: oauth.AuthorizationServer;
  /** The client as oauth4webapi takes it. */
  let library: oauth.Client;

  before(async () => {
    server = await startServer();
    other = await startServer({ store: server.store, env: { BASE_URL: server.issuer } });
    user = await seedUser(server);
    key = await clientKey();
    const response = await register(server.issuer, { client_name: 'Keyed App', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [key.publicJwk] } });
    expect(response.status, await response.clone().text()).to.equal(201);
    client = await response.json() as RegisteredClient;
    library = { client_id: client.client_id };
    const issuer = new URL(server.issuer);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
  });

  after(async () => {
    await other?.stop();
    await server?.stop();
  });

  /** A code for the client, through the login and consent pages. */
  async function code(): Promise<{ code: string; verifier: string }> {
    const request = codeRequest(server.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), request.url, server.origin, { email: user.email, password: user.password });
    return { code: callback.searchParams.get('code')!, verifier: request.verifier };
  }

  /** A code redemption authenticated with `clientAssertion`, to `on`. */
  async function redeem(clientAssertion: string, on = server): Promise<Response> {
    const { code: value, verifier } = await code();
    return tokenRequest(on.issuer, {
      grant_type: 'authorization_code', code: value, code_verifier: verifier, redirect_uri: REDIRECT_URI,
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: clientAssertion,
    });
  }

  it('is advertised in discovery with asymmetric algorithms only, and registers a client with its keys inline and no secret', () => {
    expect(as.token_endpoint_auth_methods_supported).to.include('private_key_jwt');
    expect(as.token_endpoint_auth_signing_alg_values_supported).to.have.members(['ES256', 'PS256', 'EdDSA', 'RS256']);
    expect(as.introspection_endpoint_auth_methods_supported).to.include('private_key_jwt');
    expect(client.token_endpoint_auth_method).to.equal('private_key_jwt');
    expect(client).to.not.have.property('client_secret');
  });

  it('authenticates a stock client (oauth4webapi PrivateKeyJwt) through a pushed request, a code exchange and a refresh', async () => {
    const clientAuth = oauth.PrivateKeyJwt(key.privateKey, { [oauth.modifyAssertion]: (header) => { header.kid = key.publicJwk.kid; } });
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const pushed = await oauth.processPushedAuthorizationResponse(as, library, await oauth.pushedAuthorizationRequest(as, library, clientAuth, {
      response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api profile', state, code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    }, insecure));
    const url = `${as.authorization_endpoint}?${new URLSearchParams({ client_id: client.client_id, request_uri: pushed.request_uri })}`;
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    const params = oauth.validateAuthResponse(as, library, callback, state);
    const tokens = await oauth.processAuthorizationCodeResponse(as, library, await oauth.authorizationCodeGrantRequest(as, library, clientAuth, params, REDIRECT_URI, verifier, insecure));
    expect(tokens.access_token).to.be.a('string');
    const refreshed = await oauth.processRefreshTokenResponse(as, library, await oauth.refreshTokenGrantRequest(as, library, clientAuth, tokens.refresh_token!, insecure));
    expect(refreshed.access_token).to.be.a('string');
  });

  it('accepts an assertion once: replayed to the same instance, or to another one at the same moment, it is refused with invalid_client', async () => {
    const once = await assertion(client, key, server.issuer);
    expect((await redeem(once)).status).to.equal(200);
    await expectOAuthError(await redeem(once), 401, 'invalid_client');

    const raced = await assertion(client, key, server.issuer);
    const [first, second] = await Promise.all([code(), code()]);
    const send = (on: TestServer, grant: { code: string; verifier: string }) => tokenRequest(on.issuer, {
      grant_type: 'authorization_code', code: grant.code, code_verifier: grant.verifier, redirect_uri: REDIRECT_URI,
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: raced,
    });
    const statuses = (await Promise.all([send(server, first), send(other, second)])).map(({ status }) => status);
    expect(statuses.sort(), 'one instance accepts it, the other refuses it').to.deep.equal([200, 401]);
  });

  it('refuses an assertion whose audience is not the issuer alone, one signed with another key, and an expired one', async () => {
    // The engine alone would take the token endpoint's URL as the audience too.
    await expectOAuthError(await redeem(await assertion(client, key, `${server.issuer}/oauth/token`)), 401, 'invalid_client');
    await expectOAuthError(await redeem(await assertion(client, key, [server.issuer, 'https://elsewhere.example'])), 401, 'invalid_client');
    await expectOAuthError(await redeem(await assertion(client, await clientKey(), server.issuer)), 401, 'invalid_client');
    await expectOAuthError(await redeem(await assertion(client, key, server.issuer, { exp: Math.floor(Date.now() / 1000) - 120 })), 401, 'invalid_client');
  });

  it('refuses a client secret for a client registered with private_key_jwt', async () => {
    const { code: value, verifier } = await code();
    await expectOAuthError(await tokenRequest(server.issuer, {
      grant_type: 'authorization_code', code: value, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: client.client_id, client_secret: 'anything',
    }), 401, 'invalid_client');
  });

  it('refuses at registration keys behind a jwks_uri (the server fetches nothing a registrant names) and private_key_jwt without keys', async () => {
    const byUri = await register(server.issuer, { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'https://keys.example/jwks.json' });
    expect((await expectOAuthError(byUri, 400, 'invalid_client_metadata')).error_description).to.include('inline, in jwks');
    const without = await register(server.issuer, { token_endpoint_auth_method: 'private_key_jwt' });
    await expectOAuthError(without, 400, 'invalid_client_metadata');
  });
});
