import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';
import express, { type ErrorRequestHandler, type Handler } from 'express';
import { auth, requiredScopes, type AuthOptions } from 'express-oauth2-jwt-bearer';
import { decodeJwt, decodeProtectedHeader, importJWK, SignJWT, type JWK } from 'jose';

import { clientCredentialsToken } from '../support/data_api.ts';
import { codeRequest, exchangeCode, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { freePort, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { privateJwk } from '../support/keys.ts';

/**
 * Someone else's API protected by the service's access tokens: an Express app using Auth0's
 * express-oauth2-jwt-bearer, told only the issuer (it finds jwks_uri by discovery) and the
 * audience, in its strict RFC 9068 profile (`strict: true`: `typ` must be `at+jwt`, and `iat`,
 * `sub`, `client_id` and `jti` must be present) with ES256 as the only signing algorithm.
 */

interface Refusal {
  error?: string;
  message: string;
}

describe('a third-party resource server (express-oauth2-jwt-bearer) accepting the service\'s access tokens', function () {
  this.timeout(30_000);

  let dir: string;
  let server: TestServer;
  /** The service's ES256 signing key (given as JWKS_FILE), to re-sign a genuine token with an earlier expiry. */
  let signingKey: JWK;
  let user: SeededUser;
  let client: RegisteredClient;
  let api: Server;
  let apiUrl: string;
  /** From the authorization code flow (scope openid profile api). */
  let userToken: string;
  let idToken: string;
  /** From client_credentials (scope api). */
  let workspaceToken: string;
  let workspaceClient: RegisteredClient;

  /** The claims the third-party API answers with: what it read from the verified token. */
  const whoAmI: Handler = (request, response) => {
    const payload = request.auth!.payload;
    response.json({ sub: payload.sub, client_id: payload.client_id, scope: payload.scope, workspace_id: payload.workspace_id, typ: request.auth!.header.typ });
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'third-party-rs-'));
    signingKey = await privateJwk('ES256');
    await writeFile(join(dir, 'jwks.json'), JSON.stringify({ keys: [signingKey, await privateJwk('RS256')] }));
    server = await startServer({ env: { JWKS_FILE: join(dir, 'jwks.json') } });
    user = await seedUser(server, [{ workspace: 'Third Party Co', role: 'member' }]);
    // ID tokens signed with ES256 like the access tokens, so that only the token type tells them apart.
    client = await registerClient(server.issuer, { client_name: 'Third-party API test', id_token_signed_response_alg: 'ES256' });

    const request = codeRequest(server.issuer, client.client_id, { scope: 'openid profile api' });
    const callback = await authorize(new UserAgent(), request.url, server.origin, { email: user.email, password: user.password });
    const exchanged = await exchangeCode(server.issuer, client, callback.searchParams.get('code') ?? '', request.verifier);
    expect(exchanged.status).to.equal(200);
    ({ access_token: userToken, id_token: idToken } = await exchanged.json() as { access_token: string; id_token: string });
    ({ access_token: workspaceToken, client: workspaceClient } = await clientCredentialsToken(server, user.workspaces[0]!.id));

    const audience = `${server.issuer}/rest`;
    const strict: AuthOptions = { issuerBaseURL: server.issuer, audience, tokenSigningAlg: 'ES256', strict: true };
    const app = express();
    app.get('/records', auth(strict), requiredScopes('api'), whoAmI);
    // The same library configured for some other API: the service's tokens are not for it.
    app.get('/other-api/records', auth({ ...strict, audience: 'https://api.other.example/' }), whoAmI);
    // An API that (wrongly) also accepts the client's id as an audience, so that an ID token passes
    // every check but the type: strict, then not.
    app.get('/lax-audience/strict', auth({ ...strict, audience: [audience, client.client_id] }), whoAmI);
    app.get('/lax-audience/not-strict', auth({ ...strict, audience: [audience, client.client_id], strict: false }), whoAmI);
    const errors: ErrorRequestHandler = (error: { status?: number; code?: string; headers?: Record<string, string>; message: string }, _request, response, _next) => {
      response.status(error.status ?? 500).set(error.headers ?? {}).json({ error: error.code, message: error.message } satisfies Refusal);
    };
    app.use(errors);
    const port = await freePort();
    api = await new Promise<Server>((resolve) => { const listening = app.listen(port, '127.0.0.1', () => resolve(listening)); });
    apiUrl = `http://127.0.0.1:${port}`;
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-40).join('\n'));
  });

  after(async () => {
    api?.closeAllConnections();
    await new Promise((resolve) => api ? api.close(resolve) : resolve(undefined));
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function call<T = Record<string, unknown>>(path: string, token: string): Promise<{ status: number; challenge: string | null; body: T }> {
    const response = await fetch(`${apiUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: response.status, challenge: response.headers.get('www-authenticate'), body: await response.json() as T };
  }

  async function expectRefused(path: string, token: string, reason: RegExp): Promise<void> {
    const refused = await call<Refusal>(path, token);
    expect(refused.status, JSON.stringify(refused.body)).to.equal(401);
    expect(refused.body.error).to.equal('invalid_token');
    expect(refused.body.message).to.match(reason);
    expect(refused.challenge).to.match(/^Bearer realm="api", error="invalid_token"/);
  }

  it('accepts a user\'s access token from the authorization code flow', async () => {
    expect(decodeProtectedHeader(userToken)).to.include({ typ: 'at+jwt', alg: 'ES256' });
    // express-oauth2-jwt-bearer (1.10) takes the algorithms it allows for access tokens from the
    // discovery document's id_token_signing_alg_values_supported (there is no metadata for access
    // tokens): it accepts ES256 access tokens only because ES256 is listed there too.
    const metadata = await (await fetch(`${server.issuer}/.well-known/openid-configuration`)).json() as { id_token_signing_alg_values_supported: string[] };
    expect(metadata.id_token_signing_alg_values_supported).to.include('ES256');
    const accepted = await call('/records', userToken);
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
    expect(accepted.body).to.deep.equal({ sub: user.id, client_id: client.client_id, scope: 'openid profile api', workspace_id: user.workspaces[0]!.id, typ: 'at+jwt' });
  });

  it('accepts a client-credentials access token', async () => {
    const accepted = await call('/records', workspaceToken);
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
    // RFC 9068 2.2: without a user, sub is the client's id.
    expect(accepted.body).to.deep.equal({ sub: workspaceClient.client_id, client_id: workspaceClient.client_id, scope: 'api', workspace_id: user.workspaces[0]!.id, typ: 'at+jwt' });
  });

  it('refuses a token whose payload was changed (signature no longer matches)', async () => {
    const [header, payload, signature] = userToken.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    const changed = Buffer.from(JSON.stringify({ ...claims, workspace_id: 'ws_someone_elses' })).toString('base64url');
    await expectRefused('/records', `${header}.${changed}.${signature}`, /signature verification failed/);
    expect((await call('/records', userToken)).status, 'control: the untouched token').to.equal(200);
  });

  it('refuses the service\'s tokens when configured for another audience', async () => {
    await expectRefused('/other-api/records', userToken, /Unexpected 'aud' value/);
    await expectRefused('/other-api/records', workspaceToken, /Unexpected 'aud' value/);
  });

  it('refuses an ID token: it is not typed at+jwt, even where its audience would pass', async () => {
    expect(decodeProtectedHeader(idToken)).to.include({ alg: 'ES256' });
    expect(decodeProtectedHeader(idToken).typ, 'the ID token is not typed as an access token').not.to.equal('at+jwt');
    expect(decodeJwt(idToken).aud).to.equal(client.client_id);
    await expectRefused('/records', idToken, /Unexpected 'typ' value/);
    await expectRefused('/lax-audience/strict', idToken, /Unexpected 'typ' value/);
    // Only the strict profile's type check keeps it out once the audience matches: what RFC 9068 4 asks of resource servers.
    expect((await call('/lax-audience/not-strict', idToken)).status).to.equal(200);
    expect((await call('/lax-audience/strict', userToken)).status, 'control: an access token on the same route').to.equal(200);
  });

  it('refuses a token once it has expired', async () => {
    // Waiting an hour is not an option: the same token, expired, re-signed with the service's own key.
    const now = Math.floor(Date.now() / 1000);
    const claims = decodeJwt(userToken);
    const expired = await new SignJWT({ ...claims, iat: now - 3700, exp: now - 100 })
      .setProtectedHeader(decodeProtectedHeader(userToken) as { alg: string })
      .sign(await importJWK(signingKey, 'ES256'));
    await expectRefused('/records', expired, /Unexpected 'exp' value|"exp" claim timestamp check failed/);
    const stillValid = await new SignJWT({ ...claims, iat: now - 3000, exp: now + 600 })
      .setProtectedHeader(decodeProtectedHeader(userToken) as { alg: string })
      .sign(await importJWK(signingKey, 'ES256'));
    expect((await call('/records', stillValid)).status, 'control: re-signed but unexpired').to.equal(200);
  });
});
