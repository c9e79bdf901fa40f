import { randomUUID } from 'node:crypto';

import { expect } from 'chai';
import { decodeJwt, SignJWT } from 'jose';
import * as oauth from 'oauth4webapi';
import * as openidClient from 'openid-client';

import { LIFETIMES } from '../../config/lifetimes.ts';
import { FAPI_CODE_LIFETIME_MAX } from '../../src/clients/fapi.ts';
import {
  REDIRECT_URI, codeRequest, exchangeCode, introspect, management, pkcePair, postCredentials, register, registerClient, tokenRequest, type RegisteredClient,
} from '../support/oauth.ts';
import { expectOAuthError } from '../support/oauth_errors.ts';
import { startRedis } from '../support/redis.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { clientKey, type ClientKey } from '../support/keys.ts';

const insecure = { [oauth.allowInsecureRequests]: true };
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** A client assertion (RFC 7523) for the issuer, signed with `key`. */
function assertion(clientId: string, key: ClientKey, issuer: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ jti: randomUUID(), iss: clientId, sub: clientId, aud: issuer, iat: now, exp: now + 60 })
    .setProtectedHeader({ alg: key.publicJwk.alg!, kid: key.publicJwk.kid! })
    .sign(key.privateKey);
}

/** What a FAPI client registers: private_key_jwt with its public keys inline. */
function fapiMetadata(keys: ClientKey[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { client_name: 'FAPI App', redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: keys.map((key) => key.publicJwk) }, ...extra };
}

/** A FAPI 2.0 client as a stock library (oauth4webapi) runs it: PAR with PKCE and a DPoP key, private_key_jwt, DPoP at the token endpoint. */
class FapiClient {
  readonly as: oauth.AuthorizationServer;
  readonly client: oauth.Client;
  readonly key: ClientKey;
  readonly auth: oauth.ClientAuth;
  readonly dpop: oauth.DPoPHandle;

  constructor(as: oauth.AuthorizationServer, clientId: string, key: ClientKey, dpopKeys: oauth.CryptoKeyPair) {
    this.as = as;
    this.client = { client_id: clientId };
    this.key = key;
    this.auth = oauth.PrivateKeyJwt(key.privateKey, { [oauth.modifyAssertion]: (header) => { header.kid = key.publicJwk.kid; } });
    this.dpop = oauth.DPoP(this.client, dpopKeys);
  }

  static async create(server: TestServer, clientId: string, key: ClientKey): Promise<FapiClient> {
    const issuer = new URL(server.issuer);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
    return new FapiClient(as, clientId, key, await oauth.generateKeyPair('ES256'));
  }

  /** PAR (with a DPoP proof, binding the code to the key, unless `dpopAtPar` is false), then the browser through sign-in and consent. */
  async authorize(server: TestServer, user: SeededUser, { dpopAtPar = true } = {}): Promise<{ callback: URL; verifier: string; state: string }> {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const pushed = await oauth.processPushedAuthorizationResponse(this.as, this.client, await oauth.pushedAuthorizationRequest(this.as, this.client, this.auth, {
      response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api profile', state, code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    }, { ...(dpopAtPar ? { DPoP: this.dpop } : {}), ...insecure }));
    const url = `${this.as.authorization_endpoint}?${new URLSearchParams({ client_id: this.client.client_id, request_uri: pushed.request_uri })}`;
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    return { callback, verifier, state };
  }

  async tokens(server: TestServer, user: SeededUser): Promise<oauth.TokenEndpointResponse> {
    const { callback, verifier, state } = await this.authorize(server, user);
    const params = oauth.validateAuthResponse(this.as, this.client, callback, state);
    return oauth.processAuthorizationCodeResponse(this.as, this.client, await oauth.authorizationCodeGrantRequest(this.as, this.client, this.auth, params, REDIRECT_URI, verifier, { DPoP: this.dpop, ...insecure }));
  }

  /** A refresh with private_key_jwt and a DPoP proof; the answer as sent. */
  refreshRequest(refreshToken: string): Promise<Response> {
    return oauth.refreshTokenGrantRequest(this.as, this.client, this.auth, refreshToken, { DPoP: this.dpop, ...insecure });
  }

  async refresh(refreshToken: string): Promise<oauth.TokenEndpointResponse> {
    return oauth.processRefreshTokenResponse(this.as, this.client, await this.refreshRequest(refreshToken));
  }

  /** private_key_jwt in the form, for introspection and revocation. */
  async credentials(issuer: string): Promise<Record<string, string>> {
    return { client_id: this.client.client_id, client_assertion_type: ASSERTION_TYPE, client_assertion: await assertion(this.client.client_id, this.key, issuer) };
  }
}

/** PAR with a raw client assertion: what a client that does not follow the profile sends. */
function push(server: TestServer, form: Record<string, string>): Promise<Response> {
  return fetch(`${server.issuer}/oauth/par`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) });
}

interface Running {
  server: TestServer;
  stop(): Promise<void>;
}

/** The stores refreshes are checked on: the server's own SQLite file, and Redis. */
const BACKENDS: Array<{ name: string; start(env: Record<string, string>): Promise<Running> }> = [
  {
    name: 'SQLite',
    async start(env) {
      const server = await startServer({ env });
      return { server, stop: () => server.stop() };
    },
  },
  {
    name: 'Redis',
    async start(env) {
      const redis = await startRedis();
      const server = await startServer({ store: redis.url, env: { ...env, KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') } });
      return { server, stop: async () => { await server.stop(); await redis.stop(); } };
    },
  },
];

const DAY = 24 * 3600;

/** The FAPI 2.0 Security Profile: for clients an operator registered for it, and with FAPI=on for every client. */
describe('FAPI 2.0 Security Profile', function () {
  this.timeout(90_000);

  it('keeps authorization codes within the profile\'s 60 seconds', () => {
    expect(LIFETIMES.AuthorizationCode).to.be.at.most(FAPI_CODE_LIFETIME_MAX);
  });

  describe('a client registered with an initial access token made with --fapi (FAPI=off)', () => {
    let server: TestServer;
    let user: SeededUser;
    let token: string;
    let key: ClientKey;
    let rsaKey: ClientKey;
    let registered: RegisteredClient;
    let fapi: FapiClient;

    before(async () => {
      // PKCE_REQUIRED=public: a confidential client's OpenID Connect request may omit PKCE, except a FAPI client's.
      server = await startServer({ env: { PKCE_REQUIRED: 'public' } });
      user = await seedUser(server);
      token = await initialAccessToken(server, user.workspaces[0]!.id, { uses: 20, fapi: true });
      key = await clientKey('ES256');
      rsaKey = await clientKey('RS256');
      const response = await register(server.issuer, fapiMetadata([key, rsaKey]), token);
      expect(response.status, await response.clone().text()).to.equal(201);
      registered = await response.json() as RegisteredClient;
      fapi = await FapiClient.create(server, registered.client_id, key);
    });

    after(async () => {
      await server?.stop();
    });

    it('is registered as a FAPI 2.0 client: PAR and DPoP-bound tokens required, ID tokens ES256', () => {
      expect(registered).to.include({
        fapi_profile: '2.0', token_endpoint_auth_method: 'private_key_jwt', require_pushed_authorization_requests: true, dpop_bound_access_tokens: true,
        id_token_signed_response_alg: 'ES256',
      });
      expect(registered).to.not.have.property('client_secret');
    });

    it('gets DPoP-bound tokens (oauth4webapi) through PAR, PKCE S256 and private_key_jwt; the redirect carries iss; the refresh is bound too', async () => {
      const { callback, verifier, state } = await fapi.authorize(server, user);
      expect(callback.searchParams.get('iss')).to.equal(server.issuer);
      const params = oauth.validateAuthResponse(fapi.as, fapi.client, callback, state);
      const tokens = await oauth.processAuthorizationCodeResponse(fapi.as, fapi.client, await oauth.authorizationCodeGrantRequest(
        fapi.as, fapi.client, fapi.auth, params, REDIRECT_URI, verifier, { DPoP: fapi.dpop, ...insecure },
      ));
      expect(tokens.token_type).to.equal('dpop');
      const jkt = (decodeJwt(tokens.access_token).cnf as { jkt?: string } | undefined)?.jkt;
      expect(jkt).to.be.a('string');
      const refreshed = await oauth.processRefreshTokenResponse(fapi.as, fapi.client, await oauth.refreshTokenGrantRequest(
        fapi.as, fapi.client, fapi.auth, tokens.refresh_token!, { DPoP: fapi.dpop, ...insecure },
      ));
      expect(refreshed.token_type).to.equal('dpop');
      expect((decodeJwt(refreshed.access_token).cnf as { jkt?: string }).jkt).to.equal(jkt);
    });

    it('gets DPoP-bound tokens with openid-client too (buildAuthorizationUrlWithPAR, DPoP)', async () => {
      const config = await openidClient.discovery(new URL(server.issuer), registered.client_id, undefined, openidClient.PrivateKeyJwt(key.privateKey, {
        [oauth.modifyAssertion]: (header) => { header.kid = key.publicJwk.kid; },
      }), { execute: [openidClient.allowInsecureRequests] });
      const DPoP = openidClient.getDPoPHandle(config, await openidClient.randomDPoPKeyPair('ES256'));
      const verifier = openidClient.randomPKCECodeVerifier();
      const state = openidClient.randomState();
      const url = await openidClient.buildAuthorizationUrlWithPAR(config, {
        redirect_uri: REDIRECT_URI, scope: 'openid api', state, code_challenge: await openidClient.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
      }, { DPoP });
      const callback = await authorize(new UserAgent(), url.href, server.origin, { email: user.email, password: user.password });
      const tokens = await openidClient.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, undefined, { DPoP });
      expect(tokens.token_type).to.equal('dpop');
      expect(tokens.id_token).to.be.a('string');
    });

    it('refuses an authorization request that was not pushed', async () => {
      const { challenge } = pkcePair();
      const url = `${server.issuer}/oauth/authorize?${new URLSearchParams({
        client_id: registered.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api', state: 'xyz', code_challenge: challenge, code_challenge_method: 'S256',
      })}`;
      const { url: landed } = await new UserAgent().follow(url, server.origin);
      const callback = new URL(landed);
      expect(callback.searchParams.get('error')).to.equal('invalid_request');
      expect(callback.searchParams.get('error_description')).to.match(/pushed authorization request/i);
      expect(callback.searchParams.has('code')).to.equal(false);
    });

    it('refuses a pushed request without PKCE, even an OpenID Connect one under PKCE_REQUIRED=public', async () => {
      const body = await expectOAuthError(await push(server, {
        client_id: registered.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'openid api', nonce: 'n-0S6_WzA2Mj',
        client_assertion_type: ASSERTION_TYPE, client_assertion: await assertion(registered.client_id, key, server.issuer),
      }), 400, 'invalid_request');
      expect(body.error_description).to.match(/PKCE/);
    });

    it('refuses a pushed request without redirect_uri', async () => {
      const { challenge } = pkcePair();
      const body = await expectOAuthError(await push(server, {
        client_id: registered.client_id, response_type: 'code', scope: 'api', code_challenge: challenge, code_challenge_method: 'S256',
        client_assertion_type: ASSERTION_TYPE, client_assertion: await assertion(registered.client_id, key, server.issuer),
      }), 400, 'invalid_request');
      expect(body.error_description).to.match(/redirect_uri/);
    });

    it('refuses a client assertion signed with RS256 (only PS256, ES256, EdDSA)', async () => {
      const { challenge } = pkcePair();
      await expectOAuthError(await push(server, {
        client_id: registered.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api', code_challenge: challenge, code_challenge_method: 'S256',
        client_assertion_type: ASSERTION_TYPE, client_assertion: await assertion(registered.client_id, rsaKey, server.issuer),
      }), 401, 'invalid_client');
      // The same key signs an accepted assertion with an algorithm the profile allows: the algorithm alone was refused.
      const pushed = await push(server, {
        client_id: registered.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api', code_challenge: challenge, code_challenge_method: 'S256',
        client_assertion_type: ASSERTION_TYPE, client_assertion: await assertion(registered.client_id, key, server.issuer),
      });
      expect(pushed.status).to.equal(201);
    });

    it('takes a pushed request object signed ES256 with the claims the profile asks for, and refuses one signed RS256 (only PS256, ES256, EdDSA)', async () => {
      const { challenge } = pkcePair();
      const now = Math.floor(Date.now() / 1000);
      const requestObject = (signer: ClientKey) => new SignJWT({
        iss: registered.client_id, aud: server.issuer, client_id: registered.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api',
        code_challenge: challenge, code_challenge_method: 'S256', nbf: now, exp: now + 300, jti: randomUUID(),
      }).setProtectedHeader({ alg: signer.publicJwk.alg!, kid: signer.publicJwk.kid!, typ: 'oauth-authz-req+jwt' }).sign(signer.privateKey);
      const pushAs = async (signer: ClientKey) => push(server, {
        client_id: registered.client_id, request: await requestObject(signer),
        client_assertion_type: ASSERTION_TYPE, client_assertion: await assertion(registered.client_id, key, server.issuer),
      });
      const refused = await expectOAuthError(await pushAs(rsaKey), 400, 'invalid_request_object');
      expect(refused.error_description).to.match(/PS256, ES256, EdDSA; RS256 is not allowed/);
      expect((await pushAs(key)).status).to.equal(201);
    });

    it('refuses a code redeemed without a DPoP proof (its request pushed without one), or with client_secret_post', async () => {
      const { callback, verifier } = await fapi.authorize(server, user, { dpopAtPar: false });
      const code = callback.searchParams.get('code')!;
      await expectOAuthError(await tokenRequest(server.issuer, {
        grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier, client_id: registered.client_id, client_secret: 'a guessed secret',
      }), 401, 'invalid_client');
      await expectOAuthError(await tokenRequest(server.issuer, {
        grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier,
        client_assertion_type: ASSERTION_TYPE, client_assertion: await assertion(registered.client_id, key, server.issuer),
      }), 400, 'invalid_grant');
    });

    it('refuses a registration with a shared secret, as a public client, or with RS256 assertions (invalid_client_metadata)', async () => {
      for (const [extra, mentions] of [
        [{ token_endpoint_auth_method: 'client_secret_post', jwks: undefined }, /private_key_jwt/],
        [{ token_endpoint_auth_method: 'client_secret_basic', jwks: undefined }, /private_key_jwt/],
        [{ token_endpoint_auth_method: 'none', jwks: undefined }, /private_key_jwt/],
        [{ token_endpoint_auth_signing_alg: 'RS256' }, /RS256/],
        [{ request_object_signing_alg: 'RS256' }, /request_object_signing_alg RS256/],
        [{ id_token_signed_response_alg: 'RS256' }, /id_token_signed_response_alg/],
        [{ dpop_bound_access_tokens: false }, /DPoP/],
        [{ require_pushed_authorization_requests: false }, /PAR/],
      ] as const) {
        const body = await expectOAuthError(await register(server.issuer, fapiMetadata([key], extra), token), 400, 'invalid_client_metadata');
        expect(body.error_description, JSON.stringify(extra)).to.match(mentions);
      }
    });

    it('refuses an ID token or userinfo algorithm FAPI 2.0 allows but this server does not sign with, naming the one it does, not RS256', async () => {
      for (const field of ['id_token_signed_response_alg', 'userinfo_signed_response_alg']) {
        for (const algorithm of ['PS256', 'EdDSA']) {
          const body = await expectOAuthError(await register(server.issuer, fapiMetadata([key], { [field]: algorithm }), token), 400, 'invalid_client_metadata');
          expect(body.error_description, `${field} ${algorithm}`).to.contain(`${field} is ES256`).and.not.contain('RS256');
        }
      }
    });

    it('stays a FAPI client through an RFC 7592 update, which cannot turn DPoP off', async () => {
      const uri = registered.registration_client_uri!;
      const current = await (await management(uri, registered.registration_access_token)).json() as Record<string, unknown>;
      const { registration_client_uri: _uri, registration_access_token: _token, client_id_issued_at: _issued, ...metadata } = current;
      const body = await expectOAuthError(await management(uri, registered.registration_access_token, 'PUT', { ...metadata, dpop_bound_access_tokens: false }), 400, 'invalid_client_metadata');
      expect(body.error_description).to.match(/DPoP/);
      const { fapi_profile: _profile, ...withoutProfile } = metadata;
      const updated = await management(uri, registered.registration_access_token, 'PUT', { ...withoutProfile, client_name: 'FAPI App, renamed' });
      const answer = await updated.json() as Record<string, unknown>;
      expect(updated.status, JSON.stringify(answer)).to.equal(200);
      expect(answer).to.include({ client_name: 'FAPI App, renamed', fapi_profile: '2.0', dpop_bound_access_tokens: true });
      registered = { ...registered, registration_access_token: answer.registration_access_token as string };
    });

    it('does not take fapi_profile from a registration without such a token', async () => {
      const response = await register(server.issuer, { redirect_uris: [REDIRECT_URI], fapi_profile: '2.0' });
      const body = await response.json() as Record<string, unknown>;
      expect(response.status, JSON.stringify(body)).to.equal(201);
      expect(body).to.not.have.property('fapi_profile');
      expect(body).to.include({ token_endpoint_auth_method: 'client_secret_post' });
    });
  });

  describe('FAPI=on: every client that obtains tokens', () => {
    let before_: TestServer;
    let server: TestServer;
    let user: SeededUser;
    let key: ClientKey;
    /** Registered before FAPI=on: a client_secret_post client, and a private_key_jwt one that asked for nothing of FAPI. */
    let secretClient: RegisteredClient;
    let keyedClient: RegisteredClient;

    before(async () => {
      before_ = await startServer();
      user = await seedUser(before_);
      key = await clientKey('ES256');
      secretClient = await (await register(before_.issuer, { redirect_uris: [REDIRECT_URI] })).json() as RegisteredClient;
      const keyed = await register(before_.issuer, fapiMetadata([key]));
      expect(keyed.status).to.equal(201);
      keyedClient = await keyed.json() as RegisteredClient;
      // The same store, served with FAPI=on.
      server = await startServer({ store: before_.store, env: { FAPI: 'on' } });
    });

    after(async () => {
      await server?.stop();
      await before_?.stop();
    });

    it('says in discovery that authorization requests are pushed (RFC 9126 section 5)', async () => {
      const metadata = await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>;
      expect(metadata.require_pushed_authorization_requests).to.equal(true);
    });

    it('lists in discovery only the client authentication and algorithms a FAPI client may use (RFC 8414 section 2)', async () => {
      for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
        const metadata = await (await fetch(`${server.issuer}${path}`)).json() as Record<string, string[]>;
        expect(metadata.token_endpoint_auth_methods_supported, path).to.deep.equal(['private_key_jwt']);
        expect(metadata.revocation_endpoint_auth_methods_supported, path).to.deep.equal(['private_key_jwt']);
        for (const field of ['token_endpoint_auth_signing_alg_values_supported', 'revocation_endpoint_auth_signing_alg_values_supported', 'id_token_signing_alg_values_supported', 'userinfo_signing_alg_values_supported', 'request_object_signing_alg_values_supported']) {
          expect(metadata[field], `${path} ${field}`).to.include('ES256');
          expect(metadata[field], `${path} ${field}`).to.satisfy((algorithms: string[]) => algorithms.every((algorithm) => ['PS256', 'ES256', 'EdDSA'].includes(algorithm)));
        }
        // The operator's resource servers introspect with a secret still: they obtain no token, so are no FAPI clients.
        expect(metadata.introspection_endpoint_auth_methods_supported, path).to.include('client_secret_basic');
      }
    });

    it('refuses an open registration that is not a FAPI client\'s, and makes one that is a FAPI client', async () => {
      const body = await expectOAuthError(await register(server.issuer, { redirect_uris: [REDIRECT_URI] }), 400, 'invalid_client_metadata');
      expect(body.error_description).to.match(/private_key_jwt/);
      const response = await register(server.issuer, fapiMetadata([key]));
      const registered = await response.json() as Record<string, unknown>;
      expect(response.status, JSON.stringify(registered)).to.equal(201);
      expect(registered).to.include({ require_pushed_authorization_requests: true, dpop_bound_access_tokens: true, id_token_signed_response_alg: 'ES256' });
      const tokens = await (await FapiClient.create(server, registered.client_id as string, key)).tokens(server, user);
      expect(tokens.token_type).to.equal('dpop');
    });

    it('holds a client registered before to the profile: a shared secret is refused with invalid_client at the token and PAR endpoints, a keyed client needs PAR and DPoP', async () => {
      const body = await expectOAuthError(await tokenRequest(server.issuer, {
        grant_type: 'refresh_token', refresh_token: 'whatever', client_id: secretClient.client_id, client_secret: secretClient.client_secret!,
      }), 401, 'invalid_client');
      expect(body.error_description).to.match(/private_key_jwt/);
      const { challenge: secretChallenge } = pkcePair();
      const pushed = await expectOAuthError(await push(server, {
        client_id: secretClient.client_id, client_secret: secretClient.client_secret!, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api',
        code_challenge: secretChallenge, code_challenge_method: 'S256',
      }), 401, 'invalid_client');
      expect(pushed.error_description).to.match(/private_key_jwt/);

      const { challenge } = pkcePair();
      const notPushed = `${server.issuer}/oauth/authorize?${new URLSearchParams({
        client_id: keyedClient.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api', code_challenge: challenge, code_challenge_method: 'S256',
      })}`;
      const { response } = await new UserAgent().follow(notPushed, server.origin);
      // Not vetted: the error is shown on a page rather than sent to the redirect URI.
      expect(await response.text()).to.match(/pushed authorization request/i);
      const tokens = await (await FapiClient.create(server, keyedClient.client_id, key)).tokens(server, user);
      expect(tokens.token_type).to.equal('dpop');
    });

    it('refuses a refresh it does not rotate that names two resources, or one none of this server\'s, with invalid_target (no token for either), and the refresh token still works', async () => {
      const fapi = await FapiClient.create(server, keyedClient.client_id, key);
      const { refresh_token: refreshToken } = await fapi.tokens(server, user);
      for (const resources of [[`${server.issuer}/rest`, `${server.issuer}/mcp`], ['https://elsewhere.example/api']]) {
        const response = await oauth.refreshTokenGrantRequest(fapi.as, fapi.client, fapi.auth, refreshToken!, {
          DPoP: fapi.dpop, additionalParameters: new URLSearchParams(resources.map((resource) => ['resource', resource])), ...insecure,
        });
        const body = await response.json() as { error?: string; access_token?: string };
        expect([response.status, body.error], resources.join(' and ')).to.deep.equal([400, 'invalid_target']);
      }
      expect((await fapi.refresh(refreshToken!)).refresh_token).to.equal(refreshToken);
    });

    it('does not rotate a client\'s refresh token: the retry with it after a lost answer gets tokens (FAPI 2.0 section 5.3.2.1)', async () => {
      const fapi = await FapiClient.create(server, keyedClient.client_id, key);
      const { refresh_token: refreshToken } = await fapi.tokens(server, user);
      const lost = await fapi.refresh(refreshToken!);
      const retried = await fapi.refresh(refreshToken!);
      expect([lost.refresh_token, retried.refresh_token]).to.deep.equal([refreshToken, refreshToken]);
      expect(retried.token_type).to.equal('dpop');
    });

    it('leaves the settings area\'s own sign-in working', async () => {
      const { url, response } = await new UserAgent().follow(`${server.issuer}/settings`, server.origin);
      expect(response.status, url).to.equal(200);
      expect(await response.text()).to.match(/name="password"/);
    });
  });

  /**
   * FAPI 2.0 section 5.3.2.1: no refresh token rotation unless the retry with the previous refresh
   * token succeeds when the answer with the new one was lost. A FAPI client's refresh token is not
   * rotated, on either store; any other client's still is.
   */
  for (const backend of BACKENDS) {
    describe(`refresh on ${backend.name}: a FAPI client's refresh token is not rotated, any other client's is`, () => {
      const ABSOLUTE_DAYS = 90;
      let running: Running;
      let server: TestServer;
      let user: SeededUser;
      let fapi: FapiClient;
      let plain: RegisteredClient;

      before(async () => {
        running = await backend.start({ REFRESH_TOKEN_ABSOLUTE_LIFETIME: `${ABSOLUTE_DAYS}d` });
        server = running.server;
        user = await seedUser(server);
        const key = await clientKey('ES256');
        const registered = await registerClient(server.issuer, fapiMetadata([key]), await initialAccessToken(server, user.workspaces[0]!.id, { fapi: true }));
        fapi = await FapiClient.create(server, registered.client_id, key);
        plain = await registerClient(server.issuer);
      });

      after(async () => {
        await running?.stop();
      });

      async function active(token: string): Promise<unknown> {
        return (await introspect(server.issuer, await fapi.credentials(server.issuer), token)).active;
      }

      it('answers the same refresh token to every use of it, one after another or at once, each with a new access token; the grant stays', async () => {
        const { refresh_token: refreshToken, access_token: first } = await fapi.tokens(server, user);
        const answers: oauth.TokenEndpointResponse[] = [];
        // The first answer as good as lost: the client retries with the refresh token it holds.
        for (let i = 0; i < 3; i++) answers.push(await fapi.refresh(refreshToken!));
        answers.push(...await Promise.all(Array.from({ length: 5 }, () => fapi.refresh(refreshToken!))));
        for (const answer of answers) {
          expect([undefined, refreshToken]).to.include(answer.refresh_token);
          expect(answer.token_type).to.equal('dpop');
        }
        const accessTokens = [first, ...answers.map((answer) => answer.access_token)];
        expect(new Set(accessTokens).size).to.equal(accessTokens.length);
        for (const token of [refreshToken!, ...accessTokens]) expect(await active(token)).to.equal(true);
      });

      it(`lasts REFRESH_TOKEN_ABSOLUTE_LIFETIME (${ABSOLUTE_DAYS} days) from the sign-in, used or not: its expiry is final`, async () => {
        const { refresh_token: refreshToken } = await fapi.tokens(server, user);
        const issued = await introspect(server.issuer, await fapi.credentials(server.issuer), refreshToken!);
        expect((issued.exp as number) - (issued.iat as number)).to.be.closeTo(ABSOLUTE_DAYS * DAY, 1);
        await fapi.refresh(refreshToken!);
        await fapi.refresh(refreshToken!);
        const used = await introspect(server.issuer, await fapi.credentials(server.issuer), refreshToken!);
        expect(used).to.include({ active: true, exp: issued.exp });
      });

      it('ends with its grant: once it is revoked (RFC 7009), it and the access tokens it issued are refused', async () => {
        const { refresh_token: refreshToken } = await fapi.tokens(server, user);
        await fapi.refresh(refreshToken!);
        const { access_token: accessToken } = await fapi.refresh(refreshToken!);
        const revoked = await fetch(`${server.issuer}/oauth/revoke`, {
          method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token: refreshToken!, ...await fapi.credentials(server.issuer) }),
        });
        expect(revoked.status).to.equal(200);
        await expectOAuthError(await fapi.refreshRequest(refreshToken!), 400, 'invalid_grant');
        expect(await active(accessToken)).to.equal(false);
      });

      it('rotates any other client\'s refresh token (30 days unused), and a reuse of a rotated-out one revokes the grant', async () => {
        const { url, verifier } = codeRequest(server.issuer, plain.client_id);
        const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
        const first = await (await exchangeCode(server.issuer, plain, callback.searchParams.get('code')!, verifier)).json() as oauth.TokenEndpointResponse;
        const issued = await introspect(server.issuer, postCredentials(plain), first.refresh_token!);
        expect((issued.exp as number) - (issued.iat as number)).to.be.closeTo(30 * DAY, 1);
        const refresh = (refreshToken: string) => tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(plain) });
        const second = await (await refresh(first.refresh_token!)).json() as oauth.TokenEndpointResponse;
        expect(second.refresh_token).to.be.a('string').and.not.equal(first.refresh_token);
        await expectOAuthError(await refresh(first.refresh_token!), 400, 'invalid_grant');
        await expectOAuthError(await refresh(second.refresh_token!), 400, 'invalid_grant');
        expect((await introspect(server.issuer, postCredentials(plain), second.access_token)).active).to.equal(false);
      });
    });
  }
});
