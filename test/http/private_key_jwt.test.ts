import { generateKeyPairSync, randomUUID } from 'node:crypto';

import { expect } from 'chai';
import { SignJWT } from 'jose';
import * as oauth from 'oauth4webapi';
import * as openidClient from 'openid-client';

import { REDIRECT_URI, codeRequest, register, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { startDocumentServer, type DocumentServer } from '../support/document_server.ts';
import { expectOAuthError } from '../support/oauth_errors.ts';
import { eventually } from '../support/wait.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { testCertificates, type TestCertificates } from '../support/tls.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { clientKey, type ClientKey } from '../support/keys.ts';

const insecure = { [oauth.allowInsecureRequests]: true };

/** A client assertion (RFC 7523) as a client library makes one; `claims` override the defaults. */
function assertion(client: RegisteredClient, key: ClientKey, audience: string | string[], claims: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ jti: randomUUID(), iss: client.client_id, sub: client.client_id, aud: audience, iat: now, exp: now + 60, ...claims })
    .setProtectedHeader({ alg: key.publicJwk.alg!, kid: key.publicJwk.kid! })
    .sign(key.privateKey);
}

/** A refresh with a made-up refresh token, authenticated by `clientAssertion`: `invalid_grant` once the client is authenticated, `invalid_client` when not. */
function refreshAuthenticatedBy(on: TestServer, clientAssertion: string): Promise<Response> {
  return tokenRequest(on.issuer, {
    grant_type: 'refresh_token', refresh_token: 'not a refresh token',
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: clientAssertion,
  });
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

  it('refuses at registration an RSA key too short to sign an assertion it would accept, saying so; a 2048-bit one registers', async () => {
    for (const bits of [1024, 2040]) {
      // jose makes no such key; Node's crypto does.
      const { publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
      const body = await expectOAuthError(await register(server.issuer, {
        client_name: 'Short Key App', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...publicKey.export({ format: 'jwk' }), alg: 'PS256', kid: 'short' }] },
      }), 400, 'invalid_client_metadata');
      expect(body.error_description, `${bits} bits`).to.contain(`at least 2048 bits long, got one of ${bits} bits`);
    }
    const rsa = await clientKey('PS256');
    const registered = await register(server.issuer, { client_name: 'RSA App', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [rsa.publicJwk] } });
    expect(registered.status, await registered.clone().text()).to.equal(201);
    const rsaClient = await registered.json() as RegisteredClient;
    await expectOAuthError(await refreshAuthenticatedBy(server, await assertion(rsaClient, rsa, server.issuer)), 400, 'invalid_grant');
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

  it('authenticates openid-client (PrivateKeyJwt, buildAuthorizationUrlWithPAR) through a pushed request and a code exchange', async () => {
    const config = await openidClient.discovery(new URL(server.issuer), client.client_id, undefined, openidClient.PrivateKeyJwt(key.privateKey, {
      [oauth.modifyAssertion]: (header) => { header.kid = key.publicJwk.kid; },
    }), { execute: [openidClient.allowInsecureRequests] });
    const verifier = openidClient.randomPKCECodeVerifier();
    const state = openidClient.randomState();
    const url = await openidClient.buildAuthorizationUrlWithPAR(config, {
      redirect_uri: REDIRECT_URI, scope: 'api profile', state, code_challenge: await openidClient.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    });
    expect(url.searchParams.get('request_uri')).to.match(/^urn:ietf:params:oauth:request_uri:/);
    expect(url.searchParams.get('scope'), 'the parameters stay off the URL').to.equal(null);
    const callback = await authorize(new UserAgent(), url.href, server.origin, { email: user.email, password: user.password });
    const tokens = await openidClient.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.access_token).to.be.a('string');
    expect(tokens.refresh_token).to.be.a('string');
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

  it('says why it refuses an assertion whose signature it verified (one made for the token endpoint\'s URL, as Spring Security and Authlib make them), and nothing about one it did not', async () => {
    const forEndpoint = await expectOAuthError(await redeem(await assertion(client, key, `${server.issuer}/oauth/token`)), 401, 'invalid_client');
    expect(forEndpoint.error_description).to.equal(`the client assertion's audience (aud) must be the issuer identifier, ${server.issuer}, alone`);
    const future = await expectOAuthError(await redeem(await assertion(client, key, server.issuer, { iat: Math.floor(Date.now() / 1000) + 600 })), 401, 'invalid_client');
    expect(future.error_description).to.match(/issued in the future \(iat\): check the client's clock/);
    const otherKey = await expectOAuthError(await redeem(await assertion(client, await clientKey(), `${server.issuer}/oauth/token`)), 401, 'invalid_client');
    expect(otherKey.error_description, 'signed with a key not the client\'s: the engine\'s words alone').to.equal('client authentication failed');
  });

  it('refuses an assertion valid for more than an hour or issued in the future, and keeps nothing of it', async () => {
    const now = Math.floor(Date.now() / 1000);
    // The log from here on: the tests before this one replay assertions on purpose.
    const logBefore = server.logs().length;
    for (const claims of [{ exp: now + 2 * 3600 }, { exp: 1e20 }, { exp: 1e300 }, { iat: now + 600 }]) {
      const far = await assertion(client, key, server.issuer, claims);
      await expectOAuthError(await refreshAuthenticatedBy(server, far), 401, 'invalid_client');
      // Refused before it was marked used: refused again for the same reason, never as a replay.
      await expectOAuthError(await refreshAuthenticatedBy(server, far), 401, 'invalid_client');
    }
    const reasons = await eventually('the refusals in the log', () => {
      const found = server.logs().slice(logBefore).split('\n').filter((line) => line.includes('"request refused"') && line.includes(client.client_id)).map((line) => (JSON.parse(line) as { detail: string }).detail);
      return found.filter((detail) => /exp|iat/.test(detail)).length >= 8 ? found : undefined;
    }, 5_000);
    expect(reasons.filter((detail) => /only be used once/.test(detail)), 'refused as replays').to.deep.equal([]);
    // An assertion that lives for the hour is still taken.
    await expectOAuthError(await refreshAuthenticatedBy(server, await assertion(client, key, server.issuer, { exp: now + 3500 })), 400, 'invalid_grant');
    expect(server.logs()).to.not.match(/"level":"error"/);
  });

  it('refuses a client secret for a client registered with private_key_jwt', async () => {
    const { code: value, verifier } = await code();
    await expectOAuthError(await tokenRequest(server.issuer, {
      grant_type: 'authorization_code', code: value, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: client.client_id, client_secret: 'anything',
    }), 401, 'invalid_client');
  });

  it('refuses at registration private_key_jwt without keys, and a jwks_uri for a client that does not authenticate with them', async () => {
    await expectOAuthError(await register(server.issuer, { token_endpoint_auth_method: 'private_key_jwt' }), 400, 'invalid_client_metadata');
    const secretWithKeys = await register(server.issuer, { token_endpoint_auth_method: 'client_secret_post', jwks_uri: 'https://keys.example/jwks.json' });
    expect((await expectOAuthError(secretWithKeys, 400, 'invalid_client_metadata')).error_description).to.include('private_key_jwt');
  });


  describe('keys by reference (jwks_uri)', () => {
    let certificates: TestCertificates;
    let documents: DocumentServer;
    let first: TestServer;
    let second: TestServer;
    let withoutFetching: TestServer;
    let referencing: RegisteredClient;
    let keyed: ClientKey;

    before(async () => {
      certificates = await testCertificates();
      documents = await startDocumentServer(certificates);
      const env = { NODE_EXTRA_CA_CERTS: certificates.caFile, CIMD_TRUSTED_HOSTS: `localhost:${documents.port}` };
      first = await startServer({ env });
      second = await startServer({ store: first.store, env: { ...env, BASE_URL: first.issuer } });
      withoutFetching = await startServer({ env: { CIMD: 'off' } });
      keyed = await clientKey('PS256');
      documents.serve('/jwks.json', { keys: [keyed.publicJwk] }, { 'cache-control': 'max-age=600' });
      const response = await register(first.issuer, { client_name: 'Keys By Reference', token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `${documents.origin}/jwks.json` });
      expect(response.status, await response.clone().text()).to.equal(201);
      referencing = await response.json() as RegisteredClient;
    });

    after(async () => {
      await Promise.all([first?.stop(), second?.stop(), withoutFetching?.stop()]);
      await documents?.stop();
      await certificates?.remove();
    });

    it('authenticates with keys fetched from the jwks_uri, once for every instance (the shared cache)', async () => {
      for (const instance of [first, second, first]) {
        const response = await refreshAuthenticatedBy(instance, await assertion(referencing, keyed, first.issuer));
        // Authenticated: the grant is what is refused, not the client.
        await expectOAuthError(response, 400, 'invalid_grant');
      }
      expect(documents.requests('/jwks.json'), 'fetches of the key set').to.equal(1);
      await expectOAuthError(await refreshAuthenticatedBy(second, await assertion(referencing, await clientKey('PS256'), first.issuer)), 401, 'invalid_client');
    });

    it('never connects to a jwks_uri on an address it may not fetch (a loopback host not trusted): the client is refused', async () => {
      const untrusted = await startDocumentServer(certificates);
      try {
        untrusted.serve('/jwks.json', { keys: [keyed.publicJwk] });
        const response = await register(first.issuer, { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `https://127.0.0.1:${untrusted.port}/jwks.json` });
        const client = await response.json() as RegisteredClient;
        await expectOAuthError(await refreshAuthenticatedBy(first, await assertion(client, keyed, first.issuer)), 401, 'invalid_client');
        expect(untrusted.connections()).to.equal(0);
      } finally {
        await untrusted.stop();
      }
    });

    it('refuses a jwks_uri where the server fetches no documents (CIMD=off), and one that is not https', async () => {
      const off = await register(withoutFetching.issuer, { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `${documents.origin}/jwks.json` });
      expect((await expectOAuthError(off, 400, 'invalid_client_metadata')).error_description).to.include('inline, in jwks');
      const plain = await register(first.issuer, { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `http://localhost:${documents.port}/jwks.json` });
      expect((await expectOAuthError(plain, 400, 'invalid_client_metadata')).error_description).to.include('https');
    });
  });
});
