import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { DatabaseSync } from 'node:sqlite';
import { gzipSync } from 'node:zlib';

import { expect } from 'chai';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import * as oauth from 'oauth4webapi';

import { openStore } from '../../adapters/index.ts';
import { digest } from '../../src/shared/digest.ts';
import { REDIRECT_URI, codeRequest, exchangeCode, introspect, pkcePair, postCredentials, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * POST /oauth/token: the authorization_code, refresh_token and client_credentials grants, their
 * RFC 6749 section 5.2 errors, single use of codes and refresh tokens (also under concurrency),
 * and the JWT access tokens (RFC 9068) and ID tokens they issue.
 */

interface AccessTokenClaims extends JWTPayload {
  jti: string;
  sub: string;
  client_id: string;
  scope: string;
  workspace_id: string;
  role?: string;
}

interface ErrorBody {
  error?: unknown;
  error_description?: unknown;
  [key: string]: unknown;
}

interface TokenBody {
  access_token?: string;
  refresh_token?: string;
  id_token?: string;
  token_type?: string;
  expires_in?: number;
  scope?: string;
  [key: string]: unknown;
}

interface Code {
  code: string;
  verifier: string;
  /** The callback's parameters, validated by oauth4webapi (state, iss). */
  params: URLSearchParams;
}

const insecure = { [oauth.allowInsecureRequests]: true } as const;

describe('token endpoint (POST /oauth/token)', function () {
  this.timeout(60_000);

  let server: TestServer;
  let user: SeededUser;
  let as: oauth.AuthorizationServer;
  let jwks: ReturnType<typeof createRemoteJWKSet>;
  let audience: string;
  /** The specification's client: authorization_code, client_secret_post. */
  let postClient: RegisteredClient;
  let basicClient: RegisteredClient;
  let publicClient: RegisteredClient;
  let otherClient: RegisteredClient;
  /** Bound to the user's first workspace (registered with an initial access token). */
  let machineClient: RegisteredClient;

  before(async () => {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Acme', role: 'admin' }, { workspace: 'Beta', role: 'member' }]);
    audience = `${server.issuer}/rest`;

    const issuer = new URL(server.issuer);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
    expect(as.token_endpoint).to.equal(`${server.issuer}/oauth/token`);
    jwks = createRemoteJWKSet(new URL(as.jwks_uri!));

    postClient = await registerClient(server.issuer);
    basicClient = await registerClient(server.issuer, { client_name: 'Basic App', token_endpoint_auth_method: 'client_secret_basic' });
    publicClient = await registerClient(server.issuer, { client_name: 'Native App', token_endpoint_auth_method: 'none' });
    otherClient = await registerClient(server.issuer, { client_name: 'Other App' });
    machineClient = await registerClient(
      server.issuer,
      { client_name: 'Sync Job', grant_types: ['client_credentials'], redirect_uris: [] },
      await initialAccessToken(server, user.workspaces[0]!.id),
    );
  });

  after(async () => {
    await server?.stop();
  });

  // ---------------------------------------------------------------- helpers

  const acme = () => user.workspaces[0]!;
  const beta = () => user.workspaces[1]!;

  /** Runs /oauth/authorize to its redirect in a fresh user agent (so every code starts a fresh grant). */
  async function getCode(client: RegisteredClient, options: { scope?: string; workspace?: string } = {}): Promise<Code> {
    const { url, state, verifier } = codeRequest(server.issuer, client.client_id, options.scope === undefined ? {} : { scope: options.scope });
    const callback = await authorize(new UserAgent(), url, server.origin, {
      email: user.email,
      password: user.password,
      workspace: options.workspace ?? acme().id,
    });
    const params = oauth.validateAuthResponse(as, { client_id: client.client_id }, callback, state);
    return { code: params.get('code')!, verifier, params };
  }

  /** A raw authorization_code redemption with the credentials in the body (client_secret_post). */
  function redeem(client: RegisteredClient, code: Code, overrides: Record<string, string | undefined> = {}): Promise<Response> {
    return exchangeCode(server.issuer, client, code.code, code.verifier, overrides);
  }

  function refresh(client: RegisteredClient, refreshToken: string, extra: Record<string, string> = {}): Promise<Response> {
    return tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client), ...extra });
  }

  function clientCredentials(client: RegisteredClient, extra: Record<string, string> = {}): Promise<Response> {
    return tokenRequest(server.issuer, { grant_type: 'client_credentials', ...postCredentials(client), ...extra });
  }

  /** Redeems a code with oauth4webapi and client_secret_post; asserts the HTTP-level success. */
  async function redeemWithLibrary(client: RegisteredClient, code: Code): Promise<oauth.TokenEndpointResponse> {
    const response = await oauth.authorizationCodeGrantRequest(
      as, { client_id: client.client_id }, oauth.ClientSecretPost(client.client_secret!), code.params, REDIRECT_URI, code.verifier, insecure,
    );
    expect(response.status).to.equal(200);
    expect(response.headers.get('cache-control')).to.include('no-store');
    return oauth.processAuthorizationCodeResponse(as, { client_id: client.client_id }, response);
  }

  async function verifyAccessToken(token: string): Promise<AccessTokenClaims> {
    const header = decodeProtectedHeader(token);
    expect(header.typ).to.equal('at+jwt');
    expect(header.alg).to.equal('ES256');
    const { payload } = await jwtVerify<AccessTokenClaims>(token, jwks, {
      issuer: server.issuer,
      audience,
      typ: 'at+jwt',
      algorithms: ['ES256'],
    });
    return payload;
  }

  /** RFC 6749 section 5.2: JSON `error` (one of `codes`) and `error_description`, the given status, no-store, no token. */
  async function expectTokenError(response: Response, status: number, codes: string | string[]): Promise<ErrorBody> {
    const text = await response.text();
    expect(response.status, `status of ${text}`).to.equal(status);
    expect(response.headers.get('content-type'), 'content-type').to.match(/^application\/json/);
    expect(response.headers.get('cache-control'), 'cache-control').to.include('no-store');
    const body = JSON.parse(text) as ErrorBody;
    expect([codes].flat(), text).to.include(body.error);
    expect(body.error_description, text).to.be.a('string').and.not.equal('');
    expect(body).not.to.have.property('access_token');
    expect(body).not.to.have.property('refresh_token');
    return body;
  }

  /** Sends the same request 5 times at once: exactly one gets 200, every other one 400 invalid_grant. */
  /** Moves a refresh token's consumption `seconds` into the past, in the server's SQLite file. */
  function backdateConsumption(storeUrl: string, storeId: string, seconds: number): void {
    const db = new DatabaseSync(storeUrl.replace(/^sqlite:/, ''));
    try {
      db.prepare("UPDATE oidc_models SET consumed_at = consumed_at - ? WHERE model = 'RefreshToken' AND id = ?").run(seconds, storeId);
    } finally {
      db.close();
    }
  }

  async function expectExactlyOneOfFive(send: () => Promise<Response>): Promise<void> {
    const responses = await Promise.all(Array.from({ length: 5 }, () => send()));
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 200), `statuses ${statuses.join(',')}`).to.have.length(1);
    for (const response of responses.filter(({ status }) => status !== 200)) {
      await expectTokenError(response, 400, 'invalid_grant');
    }
  }

  /** A successful token response as sent: 200, Cache-Control no-store, token_type "Bearer" (before oauth4webapi lower-cases it). */
  async function expectBearerResponse(response: Response): Promise<void> {
    expect(response.status).to.equal(200);
    expect(response.headers.get('cache-control')).to.include('no-store');
    const raw = await response.clone().json() as TokenBody;
    expect(raw.token_type).to.equal('Bearer');
  }

  async function expectTokens(response: Response): Promise<TokenBody> {
    const text = await response.text();
    expect(response.status, text).to.equal(200);
    expect(response.headers.get('cache-control')).to.include('no-store');
    return JSON.parse(text) as TokenBody;
  }

  // ---------------------------------------------------------------- authorization_code

  it('answers a form over 56 KiB with 413 at the engine\'s form endpoints, whether it declares its length or comes in chunks', async () => {
    const form = `grant_type=client_credentials&token=x&padding=${'a'.repeat(60 * 1024)}`;
    const chunked = () => new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < form.length; at += 16 * 1024) controller.enqueue(new TextEncoder().encode(form.slice(at, at + 16 * 1024)));
        controller.close();
      },
    });
    for (const path of ['/oauth/token', '/oauth/revoke', '/oauth/introspect', '/oauth/par']) {
      for (const [how, body] of [['declared', () => form], ['chunked', chunked]] as const) {
        const answer = await fetch(`${server.issuer}${path}`, {
          method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: body(), duplex: 'half',
        } as RequestInit & { duplex: 'half' });
        expect([answer.status, (await answer.json() as { error: string }).error], `${how} at ${path}`).to.deep.equal([413, 'invalid_request']);
      }
    }
  });

  it('refuses a body in a content coding with 415 naming the one it takes, rather than reading its bytes as a form', async () => {
    const form = new URLSearchParams({ grant_type: 'client_credentials', ...postCredentials(machineClient) }).toString();
    for (const path of ['/oauth/token', '/oauth/revoke', '/oauth/introspect', '/oauth/par']) {
      for (const [coding, body] of [['gzip', gzipSync(form)], ['zstd', Buffer.from(form)]] as const) {
        const answer = await fetch(`${server.issuer}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': coding }, body });
        expect([answer.status, answer.headers.get('accept-encoding'), (await answer.json() as { error: string }).error], `${coding} at ${path}`).to.deep.equal([415, 'identity', 'invalid_request']);
      }
    }
    const registration = await fetch(`${server.issuer}/oauth/register`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipSync(JSON.stringify({ redirect_uris: [REDIRECT_URI] })),
    });
    expect(registration.status, 'registration').to.equal(415);
    const unencoded = await tokenRequest(server.issuer, { grant_type: 'client_credentials', ...postCredentials(machineClient) }, { 'content-encoding': 'identity' });
    expect(unencoded.status, 'identity is no coding').to.equal(200);
  });

  it('answers every grant\'s tokens with Cache-Control: no-store and Pragma: no-cache, for HTTP/1.0 caches too (RFC 6749 5.1)', async () => {
    const issued = await redeem(postClient, await getCode(postClient));
    const { refresh_token: refreshToken } = await issued.clone().json() as TokenBody;
    for (const [grant, response] of [['authorization_code', issued], ['refresh_token', await refresh(postClient, refreshToken!)], ['client_credentials', await clientCredentials(machineClient)]] as const) {
      expect([response.status, response.headers.get('cache-control'), response.headers.get('pragma')], grant).to.deep.equal([200, 'no-store', 'no-cache']);
    }
  });

  describe('authorization_code', () => {
    it('issues a Bearer JWT access token, a refresh token and the scope to a client_secret_post client (the specification)', async () => {
      const code = await getCode(postClient, { scope: 'api profile', workspace: beta().id });
      const before = Math.floor(Date.now() / 1000);
      const tokens = await redeemWithLibrary(postClient, code);

      expect(tokens.token_type).to.equal('bearer'); // oauth4webapi lower-cases it; the raw value is checked below
      expect(tokens.expires_in).to.equal(3600);
      expect(tokens.refresh_token).to.be.a('string').and.not.equal('');
      expect(tokens.scope).to.be.a('string');
      expect(tokens.scope!.split(' ').sort()).to.deep.equal(['api', 'profile']);
      expect(tokens.id_token, 'no openid, no ID token').to.equal(undefined);

      const claims = await verifyAccessToken(tokens.access_token);
      expect(claims.iss).to.equal(server.issuer);
      expect(claims.sub).to.equal(user.id);
      expect(claims.aud).to.equal(audience);
      expect(claims.exp! - claims.iat!).to.equal(3600);
      expect(claims.iat).to.be.within(before - 5, before + 30);
      expect(claims.jti).to.be.a('string').and.not.equal('');
      expect(claims.client_id).to.equal(postClient.client_id);
      expect(claims.scope.split(' ').sort()).to.deep.equal(['api', 'profile']);
      expect(claims.workspace_id, 'the workspace chosen at consent').to.equal(beta().id);
      expect(claims.role, 'the user\'s role in that workspace').to.equal('member');
    });

    it('answers the raw token response with token_type "Bearer", expires_in 3600 and Cache-Control: no-store', async () => {
      const code = await getCode(postClient);
      const body = await expectTokens(await redeem(postClient, code));
      expect(body.token_type).to.equal('Bearer');
      expect(body.expires_in).to.equal(3600);
      expect(body.access_token).to.be.a('string');
      expect(body.refresh_token).to.be.a('string');
      expect(body.scope).to.be.a('string');
      expect(body).not.to.have.property('id_token');
    });

    it('works the same for a client_secret_basic client', async () => {
      const code = await getCode(basicClient, { scope: 'api', workspace: acme().id });
      const response = await oauth.authorizationCodeGrantRequest(
        as, { client_id: basicClient.client_id }, oauth.ClientSecretBasic(basicClient.client_secret!), code.params, REDIRECT_URI, code.verifier, insecure,
      );
      await expectBearerResponse(response);
      const tokens = await oauth.processAuthorizationCodeResponse(as, { client_id: basicClient.client_id }, response);
      expect(tokens.expires_in).to.equal(3600);
      expect(tokens.refresh_token).to.be.a('string').and.not.equal('');
      expect(tokens.scope).to.equal('api');

      const claims = await verifyAccessToken(tokens.access_token);
      expect(claims.sub).to.equal(user.id);
      expect(claims.client_id).to.equal(basicClient.client_id);
      expect(claims.exp! - claims.iat!).to.equal(3600);
      expect(claims.scope).to.equal('api');
      expect(claims.workspace_id).to.equal(acme().id);
      expect(claims.role).to.equal('admin');
    });

    it('returns an RS256 ID token for the client when openid is in the scope', async () => {
      const code = await getCode(postClient, { scope: 'openid api' });
      const tokens = await redeemWithLibrary(postClient, code);
      expect(tokens.id_token).to.be.a('string');
      expect(decodeProtectedHeader(tokens.id_token!).alg).to.equal('RS256');
      const { payload } = await jwtVerify(tokens.id_token!, jwks, { issuer: server.issuer, audience: postClient.client_id, algorithms: ['RS256'] });
      expect(payload.aud).to.equal(postClient.client_id);
      expect(payload.sub).to.equal(user.id);
      const claims = await verifyAccessToken(tokens.access_token);
      expect(claims.sub).to.equal(user.id);
    });

    it('refuses at consent a workspace the user does not belong to, and issues no code', async () => {
      const stranger = await seedUser(server, [{ workspace: 'Not Yours' }]);
      const { url } = codeRequest(server.issuer, postClient.client_id);
      let refusal: unknown;
      try {
        await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password, workspace: stranger.workspaces[0]!.id });
      } catch (error) {
        refusal = error;
      }
      expect(String(refusal)).to.match(/consent answered 400[\s\S]*Choose one of your workspaces/);
    });

    it('returns the code in the fragment with response_mode=fragment, and it redeems', async () => {
      const { url, state, verifier } = codeRequest(server.issuer, postClient.client_id, { response_mode: 'fragment' });
      const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password, workspace: acme().id });
      expect(callback.search).to.equal('');
      const fragment = new URLSearchParams(callback.hash.slice(1));
      expect(fragment.get('state')).to.equal(state);
      expect(fragment.get('iss')).to.equal(server.issuer);
      const response = await redeem(postClient, { code: fragment.get('code')!, verifier, params: fragment });
      expect(response.status).to.equal(200);
    });

    it('lets a public client (token_endpoint_auth_method none) redeem its own code with PKCE and no secret', async () => {
      const code = await getCode(publicClient, { scope: 'api' });
      const response = await oauth.authorizationCodeGrantRequest(
        as, { client_id: publicClient.client_id }, oauth.None(), code.params, REDIRECT_URI, code.verifier, insecure,
      );
      expect(response.status).to.equal(200);
      expect(response.headers.get('cache-control')).to.include('no-store');
      const tokens = await oauth.processAuthorizationCodeResponse(as, { client_id: publicClient.client_id }, response);
      const claims = await verifyAccessToken(tokens.access_token);
      expect(claims.client_id).to.equal(publicClient.client_id);
      expect(claims.sub).to.equal(user.id);
    });

    describe('errors', () => {
      it('refuses a wrong code_verifier with 400 invalid_grant', async () => {
        const code = await getCode(postClient);
        await expectTokenError(await redeem(postClient, code, { code_verifier: pkcePair().verifier }), 400, 'invalid_grant');
      });

      it('refuses a missing code_verifier with 400 (invalid_grant or invalid_request)', async () => {
        const code = await getCode(postClient);
        await expectTokenError(await redeem(postClient, code, { code_verifier: undefined }), 400, ['invalid_grant', 'invalid_request']);
      });

      it('refuses a redirect_uri other than the authorization request\'s with invalid_grant', async () => {
        const code = await getCode(postClient);
        await expectTokenError(await redeem(postClient, code, { redirect_uri: 'http://127.0.0.1:9/other' }), 400, 'invalid_grant');
      });

      it('refuses another client\'s code with invalid_grant', async () => {
        const code = await getCode(postClient);
        await expectTokenError(await redeem(otherClient, code), 400, 'invalid_grant');
        // and the code is still good for its own client afterwards
        await expectTokens(await redeem(postClient, code));
      });

      it('refuses an unknown code with invalid_grant', async () => {
        const code = await getCode(postClient);
        await expectTokenError(await redeem(postClient, code, { code: randomBytes(32).toString('base64url') }), 400, 'invalid_grant');
      });

      it('refuses a wrong client secret in the body with 401 invalid_client', async () => {
        const code = await getCode(postClient);
        await expectTokenError(await redeem(postClient, code, { client_secret: 'not-the-secret' }), 401, 'invalid_client');
      });

      it('refuses a wrong client secret sent with HTTP Basic with 401 invalid_client and WWW-Authenticate', async () => {
        const code = await getCode(basicClient);
        const credentials = Buffer.from(`${encodeURIComponent(basicClient.client_id)}:${encodeURIComponent('not-the-secret')}`).toString('base64');
        const response = await tokenRequest(server.issuer, {
          grant_type: 'authorization_code', code: code.code, redirect_uri: REDIRECT_URI, code_verifier: code.verifier,
        }, { authorization: `Basic ${credentials}` });
        const wwwAuthenticate = response.headers.get('www-authenticate');
        await expectTokenError(response, 401, 'invalid_client');
        expect(wwwAuthenticate, 'WWW-Authenticate').to.match(/^Basic\b/i);
      });

      it('refuses an unknown grant_type with 400 unsupported_grant_type', async () => {
        await expectTokenError(await tokenRequest(server.issuer, {
          grant_type: 'urn:example:made-up', client_id: postClient.client_id, client_secret: postClient.client_secret!,
        }), 400, 'unsupported_grant_type');
      });

      it('refuses a request without grant_type with 400 invalid_request', async () => {
        const code = await getCode(postClient);
        await expectTokenError(await redeem(postClient, code, { grant_type: undefined }), 400, 'invalid_request');
      });
    });

    describe('single use', () => {
      it('refuses a replayed code and revokes what its first redemption issued', async () => {
        const code = await getCode(postClient);
        const first = await expectTokens(await redeem(postClient, code));
        expect((await introspect(server.issuer, postCredentials(postClient), first.access_token!)).active, 'active before the replay').to.equal(true);

        await expectTokenError(await redeem(postClient, code), 400, 'invalid_grant');

        await expectTokenError(await refresh(postClient, first.refresh_token!), 400, 'invalid_grant');
        expect((await introspect(server.issuer, postCredentials(postClient), first.access_token!)).active, 'active after the replay').to.equal(false);
      });

      it('refuses an expired code (older than its 60 s lifetime) with invalid_grant', async () => {
        const control = await getCode(postClient);
        const code = await getCode(postClient);
        const store = openStore(server.store);
        try {
          const model = store.model('AuthorizationCode');
          const now = Math.floor(Date.now() / 1000);
          // Codes are stored under their digest (a copy of the store holds no usable code).
          for (const { code: id } of [control, code].map(({ code: value }) => ({ code: digest(value) }))) {
            const payload = await model.find(id);
            expect(payload, 'the code is stored under its digest').to.be.an('object');
            expect(payload!.exp).to.be.a('number').within(now + 1, now + 61);
            // The control is written back unchanged; the other is backdated as if issued 2 minutes
            // ago. Both rows stay (expiresIn stays positive), so only the code's own exp differs.
            await model.upsert(id, id === digest(code.code) ? { ...payload, iat: now - 120, exp: now - 60 } : payload!, 60);
          }
          expect((await model.find(digest(code.code)))!.exp).to.equal(now - 60);
        } finally {
          await store.close();
        }
        await expectTokenError(await redeem(postClient, code), 400, 'invalid_grant');
        // The same rewrite without backdating leaves a code that works: the expiry is what was refused.
        await expectTokens(await redeem(postClient, control));
      });

      it('lets exactly one of 5 concurrent redemptions of the same code succeed', async () => {
        const code = await getCode(postClient);
        await expectExactlyOneOfFive(() => redeem(postClient, code));
      });

      it('answers one of two concurrent redemptions with tokens, which the race then leaves revoked', async () => {
        // The loser revokes the grant while the winner is still issuing; the winner must still answer.
        for (let round = 0; round < 12; round += 1) {
          const code = await getCode(postClient);
          const responses = await Promise.all([redeem(postClient, code), redeem(postClient, code)]);
          const statuses = responses.map((response) => response.status);
          expect(statuses.filter((status) => status === 200), `round ${round}: statuses ${statuses.join(',')}`).to.have.length(1);
          const winner = await expectTokens(responses.find(({ status }) => status === 200)!);
          await expectTokenError(responses.find(({ status }) => status !== 200)!, 400, 'invalid_grant');
          expect((await introspect(server.issuer, postCredentials(postClient), winner.access_token!)).active, `round ${round}: the winner's access token`).to.equal(false);
          await expectTokenError(await refresh(postClient, winner.refresh_token!), 400, 'invalid_grant');
        }
      });
    });
  });

  // ---------------------------------------------------------------- refresh_token

  describe('refresh_token', () => {
    it('returns a new access token and a new refresh token (oauth4webapi)', async () => {
      const first = await redeemWithLibrary(postClient, await getCode(postClient, { scope: 'api profile', workspace: beta().id }));
      const response = await oauth.refreshTokenGrantRequest(
        as, { client_id: postClient.client_id }, oauth.ClientSecretPost(postClient.client_secret!), first.refresh_token!, insecure,
      );
      await expectBearerResponse(response);
      const second = await oauth.processRefreshTokenResponse(as, { client_id: postClient.client_id }, response);

      expect(second.expires_in).to.equal(3600);
      expect(second.access_token).to.not.equal(first.access_token);
      expect(second.refresh_token).to.be.a('string').and.not.equal(first.refresh_token);
      const claims = await verifyAccessToken(second.access_token);
      const firstClaims = await verifyAccessToken(first.access_token);
      expect(claims.jti).to.not.equal(firstClaims.jti);
      expect(claims.sub).to.equal(user.id);
      expect(claims.client_id).to.equal(postClient.client_id);
      expect(claims.exp! - claims.iat!).to.equal(3600);
      expect(claims.workspace_id).to.equal(beta().id);
      expect(claims.role).to.equal('member');
      expect(claims.scope.split(' ').sort()).to.deep.equal(['api', 'profile']);
    });

    it('refuses a rotated refresh token and then revokes the whole grant', async () => {
      const first = await expectTokens(await redeem(postClient, await getCode(postClient)));
      const second = await expectTokens(await refresh(postClient, first.refresh_token!));
      expect(second.refresh_token).to.be.a('string').and.not.equal(first.refresh_token);

      await expectTokenError(await refresh(postClient, first.refresh_token!), 400, 'invalid_grant');
      await expectTokenError(await refresh(postClient, second.refresh_token!), 400, 'invalid_grant');
      expect((await introspect(server.issuer, postCredentials(postClient), second.access_token!)).active).to.equal(false);
    });

    it('takes a rotated refresh token for a reuse however the refresh asks for scope (the same, less or more) and revokes the whole grant (RFC 9700 section 4.14.2)', async () => {
      for (const scope of ['api profile', 'api', 'api openid']) {
        const first = await expectTokens(await redeem(postClient, await getCode(postClient, { scope: 'api profile' })));
        const second = await expectTokens(await refresh(postClient, first.refresh_token!));

        await expectTokenError(await refresh(postClient, first.refresh_token!, { scope }), 400, 'invalid_grant');
        await expectTokenError(await refresh(postClient, second.refresh_token!), 400, 'invalid_grant');
        expect((await introspect(server.issuer, postCredentials(postClient), second.access_token!)).active, `after a reuse asking for ${scope}`).to.equal(false);
      }
    });

    it('narrows the scope when asked for less', async () => {
      const first = await expectTokens(await redeem(postClient, await getCode(postClient, { scope: 'api profile' })));
      const narrowed = await expectTokens(await refresh(postClient, first.refresh_token!, { scope: 'api' }));
      expect(narrowed.scope).to.equal('api');
      expect((await verifyAccessToken(narrowed.access_token!)).scope).to.equal('api');
    });

    it('refuses to widen the scope with 400 invalid_scope (openid not granted)', async () => {
      const first = await expectTokens(await redeem(postClient, await getCode(postClient, { scope: 'api' })));
      await expectTokenError(await refresh(postClient, first.refresh_token!, { scope: 'api openid' }), 400, 'invalid_scope');
    });

    it('refuses to widen the scope with 400 invalid_scope (profile not granted)', async () => {
      const first = await expectTokens(await redeem(postClient, await getCode(postClient, { scope: 'api' })));
      await expectTokenError(await refresh(postClient, first.refresh_token!, { scope: 'api profile' }), 400, 'invalid_scope');
    });

    it('refuses another client\'s refresh token with invalid_grant', async () => {
      const first = await expectTokens(await redeem(postClient, await getCode(postClient)));
      await expectTokenError(await refresh(otherClient, first.refresh_token!), 400, 'invalid_grant');
    });

    it('lets exactly one of 5 concurrent uses of the same refresh token succeed; the others are refused, asked to wait while it is under way', async () => {
      const first = await expectTokens(await redeem(postClient, await getCode(postClient)));
      const responses = await Promise.all(Array.from({ length: 5 }, () => refresh(postClient, first.refresh_token!)));
      const statuses = responses.map((response) => response.status);
      expect(statuses.filter((status) => status === 200), `statuses ${statuses.join(',')}`).to.have.length(1);
      for (const response of responses.filter(({ status }) => status !== 200)) {
        if (response.status === 503) {
          expect(Number(response.headers.get('retry-after'))).to.be.within(1, 20);
          await expectTokenError(response, 503, 'temporarily_unavailable');
        } else {
          await expectTokenError(response, 400, 'invalid_grant');
        }
      }
    });

    it('rotates on the retry of a rotation cut short (its token consumed, no successor stored): asked to wait at first, never taken for a reuse', async () => {
      const first = await expectTokens(await redeem(postClient, await getCode(postClient)));
      const storeId = digest(first.refresh_token!);
      const store = openStore(server.store);
      let second: TokenBody;
      try {
        // What a process killed mid-rotation leaves: the token consumed under a claim no request holds any more.
        const cut = await store.model('RefreshToken').consume(storeId);
        expect(cut).to.be.a('string');
        const wait = await refresh(postClient, first.refresh_token!);
        expect(Number(wait.headers.get('retry-after'))).to.be.within(1, 20);
        await expectTokenError(wait, 503, 'temporarily_unavailable');

        await store.committed();
        backdateConsumption(server.store, storeId, 21);
        second = await expectTokens(await refresh(postClient, first.refresh_token!));
        expect(second.refresh_token).to.be.a('string').and.not.equal(first.refresh_token);
        expect(await store.model('RefreshToken').complete(storeId, cut!), 'the cut rotation cannot complete: the retry completed it').to.equal('gone');
      } finally {
        await store.close();
      }
      const third = await expectTokens(await refresh(postClient, second.refresh_token!));
      // The token the retry rotated away from is spent like any other: presenting it again is a reuse.
      await expectTokenError(await refresh(postClient, first.refresh_token!), 400, 'invalid_grant');
      await expectTokenError(await refresh(postClient, third.refresh_token!), 400, 'invalid_grant');
    });
  });

  // ---------------------------------------------------------------- client_credentials

  describe('client_credentials', () => {
    it('issues a workspace-level JWT to a client bound to a workspace (oauth4webapi)', async () => {
      const client = { client_id: machineClient.client_id };
      const response = await oauth.clientCredentialsGrantRequest(
        as, client, oauth.ClientSecretPost(machineClient.client_secret!), { scope: 'api' }, insecure,
      );
      await expectBearerResponse(response);
      const tokens = await oauth.processClientCredentialsResponse(as, client, response);
      expect(tokens.expires_in).to.equal(3600);
      expect(tokens.scope).to.equal('api');
      expect(tokens.refresh_token).to.equal(undefined);

      const claims = await verifyAccessToken(tokens.access_token);
      expect(claims.iss).to.equal(server.issuer);
      expect(claims.sub).to.equal(machineClient.client_id);
      expect(claims.client_id).to.equal(machineClient.client_id);
      expect(claims.aud).to.equal(audience);
      expect(claims.exp! - claims.iat!).to.equal(3600);
      expect(claims.jti).to.be.a('string').and.not.equal('');
      expect(claims.scope).to.equal('api');
      expect(claims.workspace_id).to.equal(acme().id);
      expect(claims).not.to.have.property('role');
    });

    it('defaults the scope to api when none is asked for', async () => {
      const body = await expectTokens(await clientCredentials(machineClient));
      expect(body.token_type).to.equal('Bearer');
      expect(body.expires_in).to.equal(3600);
      expect(body.scope).to.equal('api');
      expect(body).not.to.have.property('refresh_token');
      const claims = await verifyAccessToken(body.access_token!);
      expect(claims.scope).to.equal('api');
      expect(claims.workspace_id).to.equal(acme().id);
    });

    it('refuses scope profile (no user behind the token) with 400 invalid_scope', async () => {
      await expectTokenError(await clientCredentials(machineClient, { scope: 'profile' }), 400, 'invalid_scope');
    });

    it('refuses an unknown scope with 400 invalid_scope', async () => {
      await expectTokenError(await clientCredentials(machineClient, { scope: 'api admin:everything' }), 400, 'invalid_scope');
    });

    it('names unknown scope values back in brief: a 40 KB scope gets an answer of a few hundred bytes', async () => {
      const response = await clientCredentials(machineClient, { scope: `api ${'x'.repeat(40_000)}` });
      const text = await response.clone().text();
      await expectTokenError(response, 400, 'invalid_scope');
      expect(text.length, text.slice(0, 300)).to.be.below(1000);
      expect((JSON.parse(text) as { error_description: string }).error_description).to.match(/^unsupported scope value: x{200}\.\.\.; supported: /);
    });

    it('says where the email is when an OpenID Connect client asks for the email scope, as stock ones do by default', async () => {
      const body = await expectTokenError(await clientCredentials(machineClient, { scope: 'api email' }), 400, 'invalid_scope');
      expect(body.error_description).to.equal('unsupported scope value: email; supported: openid api profile (the email and email_verified claims come with profile)');
    });

    it('names an unknown resource back with only the characters RFC 6749 5.2 allows in error_description: others percent-encoded, as in a URI', async () => {
      const body = await expectTokenError(await clientCredentials(machineClient, { resource: 'https://bücher.example/"api"\\日本' }), 400, 'invalid_target');
      expect(body.error_description).to.equal('unknown resource https://b%C3%BCcher.example/%22api%22%5C%E6%97%A5%E6%9C%AC; this server issues tokens for the APIs its operator registered');
    });

    it('refuses a resource other than the data APIs with 400 invalid_target', async () => {
      await expectTokenError(await clientCredentials(machineClient, { resource: 'https://elsewhere.example.com/api' }), 400, 'invalid_target');
    });

    it('accepts the data APIs as resource', async () => {
      const body = await expectTokens(await clientCredentials(machineClient, { resource: audience }));
      expect((await verifyAccessToken(body.access_token!)).aud).to.equal(audience);
    });

    it('refuses a client not registered for client_credentials with 400 unauthorized_client', async () => {
      await expectTokenError(await clientCredentials(postClient, { scope: 'api' }), 400, 'unauthorized_client');
    });

    it('refuses a wrong client secret with 401 invalid_client', async () => {
      await expectTokenError(await clientCredentials(machineClient, { client_secret: 'not-the-secret' }), 401, 'invalid_client');
    });

    it('refuses HTTP Basic with an empty password with 401 invalid_client and a Basic challenge, at the token, revocation and introspection endpoints', async () => {
      const emptyPassword = `Basic ${Buffer.from(`${encodeURIComponent(machineClient.client_id)}:`).toString('base64')}`;
      for (const [endpoint, form] of [['token', { grant_type: 'client_credentials', scope: 'api' }], ['revoke', { token: 'x' }], ['introspect', { token: 'x' }]] as const) {
        const response = await fetch(`${server.issuer}/oauth/${endpoint}`, { method: 'POST', headers: { authorization: emptyPassword }, body: new URLSearchParams(form) });
        const body = await response.json() as { error?: string };
        expect([response.status, body.error, response.headers.get('www-authenticate')], endpoint).to.deep.equal([401, 'invalid_client', 'Basic realm="oauth"']);
      }
    });

    it('refuses an Authorization header that is not Basic, or whose credentials do not decode, with 401 invalid_client and a Basic challenge at the token, revocation and introspection endpoints; a wrong secret is challenged in the same realm', async () => {
      const basic = (raw: string) => `Basic ${Buffer.from(raw).toString('base64')}`;
      const unreadable = [
        `Bearer ${machineClient.client_secret}`,
        basic(encodeURIComponent(machineClient.client_id)),
        basic(`a%ZZ:${encodeURIComponent(machineClient.client_secret!)}`),
        'Basic not*base64',
      ];
      for (const [endpoint, form] of [['token', { grant_type: 'client_credentials', scope: 'api' }], ['revoke', { token: 'x' }], ['introspect', { token: 'x' }]] as const) {
        for (const authorization of unreadable) {
          const response = await fetch(`${server.issuer}/oauth/${endpoint}`, { method: 'POST', headers: { authorization }, body: new URLSearchParams(form) });
          const body = await response.json() as { error?: string; error_description?: string };
          expect([response.status, body.error, response.headers.get('www-authenticate')], `${endpoint}: ${authorization}`).to.deep.equal([401, 'invalid_client', 'Basic realm="oauth"']);
          expect(body.error_description).to.contain('HTTP Basic');
        }
        const wrongSecret = basic(`${encodeURIComponent(machineClient.client_id)}:not-the-secret`);
        const response = await fetch(`${server.issuer}/oauth/${endpoint}`, { method: 'POST', headers: { authorization: wrongSecret }, body: new URLSearchParams(form) });
        expect(response.status, endpoint).to.equal(401);
        expect(response.headers.get('www-authenticate'), endpoint).to.match(/^Basic realm="oauth", error="invalid_client"/);
      }
    });

    it('takes HTTP Basic with more than one space after the scheme (RFC 9110 section 11.4) at the token, revocation and introspection endpoints', async () => {
      const credentials = Buffer.from(`${encodeURIComponent(machineClient.client_id)}:${encodeURIComponent(machineClient.client_secret!)}`).toString('base64');
      for (const [endpoint, form] of [['token', { grant_type: 'client_credentials', scope: 'api' }], ['revoke', { token: 'x' }], ['introspect', { token: 'x' }]] as const) {
        const response = await fetch(`${server.issuer}/oauth/${endpoint}`, { method: 'POST', headers: { authorization: `Basic   ${credentials}` }, body: new URLSearchParams(form) });
        expect(response.status, `${endpoint}: ${await response.clone().text()}`).to.equal(200);
      }
    });

    it('refuses a request naming no client with 401 invalid_client, naming every way a client authenticates, private_key_jwt included', async () => {
      const response = await fetch(`${server.issuer}/oauth/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'api' }) });
      expect(response.headers.get('www-authenticate')).to.equal('Basic realm="oauth"');
      const body = await expectTokenError(response, 401, 'invalid_client');
      for (const method of ['client_secret_post', 'client_secret_basic', 'private_key_jwt']) expect(body.error_description).to.contain(method);
    });
  });

  // ---------------------------------------------------------------- request bodies

  describe('request bodies', () => {
    it('answers a JSON body with a 400 JSON error, not a 5xx', async () => {
      const response = await fetch(`${server.issuer}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: machineClient.client_id, client_secret: machineClient.client_secret }),
      });
      const text = await response.text();
      expect(response.status, text).to.equal(400);
      expect(response.headers.get('content-type')).to.match(/^application\/json/);
      const body = JSON.parse(text) as ErrorBody;
      expect(body.error).to.be.a('string');
      expect(body.error_description).to.be.a('string');
      expect(body).not.to.have.property('access_token');
    });

    it('takes a form sent with no body at all (no Content-Length, as curl -X POST sends it) as one with no parameters: what is missing is named, not the content type', async () => {
      /** The request as written, with no Content-Length or Transfer-Encoding, which fetch always adds. */
      const bodiless = (path: string, headers: string[]) => new Promise<{ status: number; body: ErrorBody }>((resolve, reject) => {
        const { hostname, port } = new URL(server.origin);
        const socket = connect(Number(port), hostname, () => {
          socket.end([`POST ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Content-Type: application/x-www-form-urlencoded', ...headers, 'Connection: close', '', ''].join('\r\n'));
        });
        let answer = '';
        socket.on('data', (chunk: Buffer) => { answer += chunk.toString('utf8'); });
        socket.on('end', () => resolve({ status: Number(answer.split(' ')[1]), body: JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as ErrorBody }));
        socket.on('error', reject);
      });
      const basic = `Authorization: Basic ${Buffer.from(`${encodeURIComponent(machineClient.client_id)}:${encodeURIComponent(machineClient.client_secret!)}`).toString('base64')}`;
      for (const endpoint of ['token', 'revoke', 'introspect']) {
        const path = `${new URL(server.issuer).pathname.replace(/\/$/, '')}/oauth/${endpoint}`;
        const anonymous = await bodiless(path, []);
        expect([anonymous.status, anonymous.body.error], `${endpoint}: ${anonymous.body.error_description}`).to.deep.equal([401, 'invalid_client']);
        const authenticated = await bodiless(path, [basic]);
        expect([authenticated.status, authenticated.body.error], endpoint).to.deep.equal([400, 'invalid_request']);
        expect(authenticated.body.error_description, endpoint).to.match(/missing required parameter '(grant_type|token)'/);
      }
    });

    it('answers a 100 KB body with a 4xx JSON error, not a 5xx', async () => {
      const response = await tokenRequest(server.issuer, {
        grant_type: 'client_credentials',
        client_id: machineClient.client_id,
        client_secret: machineClient.client_secret!,
        padding: 'x'.repeat(100 * 1024),
      });
      const text = await response.text();
      expect(response.status, text).to.be.within(400, 499);
      expect(response.headers.get('content-type')).to.match(/^application\/json/);
      const body = JSON.parse(text) as ErrorBody;
      expect(body.error).to.be.a('string');
      expect(body).not.to.have.property('access_token');
    });
  });
});
