import { hash, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';
import { decodeJwt, exportJWK, generateKeyPair, SignJWT, calculateJwkThumbprint, type JWK } from 'jose';
import * as oauth from 'oauth4webapi';
import * as openidClient from 'openid-client';

import { usedOnceMarkerId } from '../../src/clients/client_assertions.ts';
import { REDIRECT_URI, register, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { createApiKey } from '../support/data_api.ts';
import { expectOAuthError } from '../support/oauth_errors.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

const insecure = { [oauth.allowInsecureRequests]: true };
const MCP_HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18' };
const TOOLS_LIST = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });

/** A proof key as a client library makes one. */
async function proofKey(alg = 'ES256'): Promise<CryptoKeyPair> {
  return await generateKeyPair(alg, { extractable: true }) as CryptoKeyPair;
}

/** A DPoP proof made by hand, for what the libraries never send: `claims` override the defaults. */
async function handMadeProof(keys: CryptoKeyPair, method: string, url: string, accessToken: string | undefined, claims: Record<string, unknown> = {}, alg = 'ES256'): Promise<string> {
  const jwk: JWK = await exportJWK(keys.publicKey);
  return new SignJWT({ jti: randomUUID(), htm: method, htu: url, iat: Math.floor(Date.now() / 1000), ...(accessToken ? { ath: hash('sha256', accessToken, 'base64url') } : {}), ...claims })
    .setProtectedHeader({ typ: 'dpop+jwt', alg, jwk })
    .sign(keys.privateKey);
}

/** A request to a protected resource with a DPoP-bound token and a proof (or none), as sent on the wire. */
function withProof(url: string, accessToken: string, proof: string | undefined, init: { method?: string; scheme?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Response> {
  return fetch(url, {
    method: init.method ?? 'GET',
    headers: { authorization: `${init.scheme ?? 'DPoP'} ${accessToken}`, ...(proof ? { dpop: proof } : {}), ...init.headers },
    ...(init.body ? { body: init.body } : {}),
  });
}

/** A request whose request line names `target` in absolute form (`GET https://host/path HTTP/1.1`), as fetch never sends. */
function absoluteFormRequest(server: TestServer, method: string, target: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(server.origin);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: hostname, port, method, path: target, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => { text += chunk; });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** The challenge of one scheme in a WWW-Authenticate header that may hold several. */
function challengeOf(response: Response, scheme: 'Bearer' | 'DPoP'): string | undefined {
  const header = response.headers.get('www-authenticate') ?? '';
  const start = header.search(new RegExp(`(^|, )${scheme} `));
  if (start < 0) return undefined;
  const rest = header.slice(start).replace(/^, /, '');
  const next = rest.slice(scheme.length).search(/, (Bearer|DPoP) /);
  return next < 0 ? rest : rest.slice(0, scheme.length + next);
}

async function refusedWith(response: Response, status: number, error: string): Promise<Record<string, unknown>> {
  const body = await response.json() as Record<string, unknown>;
  expect(response.status, JSON.stringify(body)).to.equal(status);
  expect(body.error, JSON.stringify(body)).to.equal(error);
  expect(body.error_description).to.be.a('string').and.not.equal('');
  return body;
}

/** A client_credentials token bound to `keys`, through oauth4webapi, answering a nonce challenge as the library's users do. */
async function boundClientCredentials(as: oauth.AuthorizationServer, client: RegisteredClient, keys: CryptoKeyPair, parameters: Record<string, string> = {}): Promise<oauth.TokenEndpointResponse> {
  const library: oauth.Client = { client_id: client.client_id };
  const DPoP = oauth.DPoP(library, keys);
  const request = () => oauth.clientCredentialsGrantRequest(as, library, oauth.ClientSecretPost(client.client_secret!), { scope: 'api', ...parameters }, { DPoP, ...insecure });
  try {
    return await oauth.processClientCredentialsResponse(as, library, await request());
  } catch (error) {
    // The handle keeps the nonce it was sent; the request is made again with it.
    if (!oauth.isDPoPNonceError(error)) throw error;
    return oauth.processClientCredentialsResponse(as, library, await request());
  }
}

/** Sender-constrained tokens (RFC 9449) end to end: the token endpoint binds, the data API, /mcp and userinfo check the proof. */
describe('DPoP', function () {
  this.timeout(90_000);
  let server: TestServer;
  /** Another instance on the same store, behind the same issuer. */
  let other: TestServer;
  let user: SeededUser;
  let as: oauth.AuthorizationServer;
  /** A client bound to a workspace, for client_credentials. */
  let workspaceClient: RegisteredClient;

  before(async () => {
    server = await startServer();
    other = await startServer({ store: server.store, env: { BASE_URL: server.issuer } });
    user = await seedUser(server);
    workspaceClient = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
    const issuer = new URL(server.issuer);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
  });

  after(async () => {
    await other?.stop();
    await server?.stop();
  });

  const boundToken = (keys: CryptoKeyPair, client: RegisteredClient = workspaceClient) => boundClientCredentials(as, client, keys);

  describe('at the token endpoint', () => {
    it('binds a client_credentials token to the proof\'s key: token_type DPoP, cnf.jkt its thumbprint', async () => {
      const keys = await proofKey();
      const tokens = await boundToken(keys);
      expect(tokens.token_type.toLowerCase()).to.equal('dpop');
      expect(decodeJwt(tokens.access_token).cnf).to.deep.equal({ jkt: await calculateJwkThumbprint(await exportJWK(keys.publicKey)) });
    });

    it('still issues a bearer token to a request without a proof', async () => {
      const response = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', client_id: workspaceClient.client_id, client_secret: workspaceClient.client_secret! });
      const body = await response.json() as { token_type: string; access_token: string };
      expect(body.token_type).to.equal('Bearer');
      expect(decodeJwt(body.access_token)).to.not.have.property('cnf');
    });

    it('refuses a proof used twice, on another instance too', async () => {
      const keys = await proofKey();
      const proof = await handMadeProof(keys, 'POST', `${server.issuer}/oauth/token`, undefined);
      const form = { grant_type: 'client_credentials', scope: 'api', client_id: workspaceClient.client_id, client_secret: workspaceClient.client_secret! };
      expect((await tokenRequest(server.issuer, form, { dpop: proof })).status).to.equal(200);
      await expectOAuthError(await tokenRequest(other.issuer, form, { dpop: proof }), 400, 'invalid_grant');
    });

    it('remembers a proof made ahead of this server\'s clock for as long as it could be accepted, so it cannot be used again later', async () => {
      const keys = await proofKey();
      const ahead = Math.floor(Date.now() / 1000) + 290;
      const jti = randomUUID();
      const proof = await handMadeProof(keys, 'POST', `${server.issuer}/oauth/token`, undefined, { iat: ahead, jti });
      const form = { grant_type: 'client_credentials', scope: 'api', client_id: workspaceClient.client_id, client_secret: workspaceClient.client_secret! };
      expect((await tokenRequest(server.issuer, form, { dpop: proof })).status).to.equal(200);
      // Accepted while its iat is within 300 s of the server's clock: until ahead + 300.
      const db = new DatabaseSync(server.store.slice('sqlite:'.length), { readOnly: true });
      try {
        const marker = db.prepare("SELECT expires_at FROM oidc_models WHERE model = 'ReplayDetection' AND id = ?").get(usedOnceMarkerId(workspaceClient.client_id, jti)) as { expires_at: number } | undefined;
        expect(marker, 'the proof\'s marker').to.not.equal(undefined);
        expect(marker!.expires_at, 'kept until the proof can no longer be accepted').to.be.at.least(ahead + 300);
      } finally {
        db.close();
      }
    });

    it('refuses a proof for another URL, or signed with an algorithm it does not take', async () => {
      const keys = await proofKey();
      const form = { grant_type: 'client_credentials', scope: 'api', client_id: workspaceClient.client_id, client_secret: workspaceClient.client_secret! };
      await refusedWith(await tokenRequest(server.issuer, form, { dpop: await handMadeProof(keys, 'POST', `${server.issuer}/oauth/par`, undefined) }), 400, 'invalid_dpop_proof');
      const rsa = await proofKey('RS256');
      await refusedWith(await tokenRequest(server.issuer, form, { dpop: await handMadeProof(rsa, 'POST', `${server.issuer}/oauth/token`, undefined, {}, 'RS256') }), 400, 'invalid_dpop_proof');
    });

    it('requires a proof from a client registered with dpop_bound_access_tokens', async () => {
      const client = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [], dpop_bound_access_tokens: true }, await initialAccessToken(server, user.workspaces[0]!.id));
      expect(client).to.have.property('dpop_bound_access_tokens', true);
      const response = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', client_id: client.client_id, client_secret: client.client_secret! });
      expect(response.status).to.equal(400);
      expect(decodeJwt((await boundToken(await proofKey(), client)).access_token)).to.have.property('cnf');
    });
  });

  describe('at the data API', () => {
    it('answers a bound token with its proof (oauth4webapi), and refuses it as Bearer, without a proof, or with another key\'s', async () => {
      const keys = await proofKey();
      const { access_token: token } = await boundToken(keys);
      const url = new URL(`${server.issuer}/rest/companies`);
      const DPoP = oauth.DPoP({ client_id: workspaceClient.client_id } as oauth.Client, keys);
      const ok = await oauth.protectedResourceRequest(token, 'GET', url, new Headers(), null, { DPoP, ...insecure });
      expect(ok.status).to.equal(200);

      const asBearer = await withProof(url.href, token, undefined, { scheme: 'Bearer' });
      await refusedWith(asBearer.clone(), 401, 'invalid_token');
      expect(challengeOf(asBearer, 'DPoP')).to.include('error="invalid_token"').and.include('algs="ES256 PS256 EdDSA Ed25519"');
      expect(challengeOf(asBearer, 'Bearer')).to.include('resource_metadata=').and.not.include('error=');

      const noProof = await withProof(url.href, token, undefined);
      await refusedWith(noProof.clone(), 401, 'invalid_dpop_proof');
      expect(challengeOf(noProof, 'DPoP')).to.include('error="invalid_dpop_proof"');

      await refusedWith(await withProof(url.href, token, await handMadeProof(await proofKey(), 'GET', url.href, token)), 401, 'invalid_dpop_proof');
    });

    it('refuses a proof replayed, to the same instance or another, and one made for another method, URL or token', async () => {
      const keys = await proofKey();
      const { access_token: token } = await boundToken(keys);
      const url = `${server.issuer}/rest/companies`;
      const proof = await handMadeProof(keys, 'GET', url, token);
      expect((await withProof(url, token, proof)).status).to.equal(200);
      await refusedWith(await withProof(url, token, proof), 401, 'invalid_dpop_proof');
      await refusedWith(await withProof(`${other.issuer}/rest/companies`, token, proof), 401, 'invalid_dpop_proof');
      // Another instance takes a fresh proof for the same token.
      expect((await withProof(`${other.issuer}/rest/companies`, token, await handMadeProof(keys, 'GET', url, token))).status).to.equal(200);

      await refusedWith(await withProof(url, token, await handMadeProof(keys, 'POST', url, token)), 401, 'invalid_dpop_proof');
      await refusedWith(await withProof(url, token, await handMadeProof(keys, 'GET', `${server.issuer}/rest/contacts`, token)), 401, 'invalid_dpop_proof');
      await refusedWith(await withProof(url, token, await handMadeProof(keys, 'GET', url, 'another token')), 401, 'invalid_dpop_proof');
      // The query string is not part of htu.
      expect((await withProof(`${url}?limit=1`, token, await handMadeProof(keys, 'GET', url, token))).status).to.equal(200);
    });

    it('compares htu with the request\'s URL as RFC 3986 normalises both (RFC 9449 section 4.3): an unreserved character percent-encoded on either side, an escape\'s hex in either case', async () => {
      const keys = await proofKey();
      const { access_token: token } = await boundToken(keys);
      const plain = `${server.issuer}/rest/companies`;
      const encoded = `${server.issuer}/rest/%63ompanies`;
      expect((await withProof(encoded, token, await handMadeProof(keys, 'GET', plain, token))).status, 'the request encoded').to.equal(200);
      expect((await withProof(plain, token, await handMadeProof(keys, 'GET', encoded, token))).status, 'the proof encoded').to.equal(200);
      const escaped = (hex: string) => `${server.issuer}/rest/companies%${hex}`;
      expect((await withProof(escaped('2f'), token, await handMadeProof(keys, 'GET', escaped('2F'), token))).status, 'an escape kept, its case not').to.equal(404);
      await refusedWith(await withProof(plain, token, await handMadeProof(keys, 'GET', `${server.issuer}/rest/%2563ompanies`, token)), 401, 'invalid_dpop_proof');
    });

    it('takes a request target in absolute form as the issuer\'s: a proof made for another server\'s URL does not match by naming that URL in the request line', async () => {
      const keys = await proofKey();
      const { access_token: token } = await boundToken(keys);
      const counterfeit = 'https://counterfeit.example/rest/companies';
      const replayed = await absoluteFormRequest(server, 'GET', counterfeit, { authorization: `DPoP ${token}`, dpop: await handMadeProof(keys, 'GET', counterfeit, token) });
      expect(replayed.status, replayed.body).to.equal(401);
      expect(JSON.parse(replayed.body)).to.include({ error: 'invalid_dpop_proof' });
      // The same request line with a proof for the issuer's URL is served: the path is what counts.
      const served = await absoluteFormRequest(server, 'GET', counterfeit, { authorization: `DPoP ${token}`, dpop: await handMadeProof(keys, 'GET', `${server.issuer}/rest/companies`, token) });
      expect(served.status, served.body).to.equal(200);

      const tokenForm = new URLSearchParams({ grant_type: 'client_credentials', scope: 'api', client_id: workspaceClient.client_id, client_secret: workspaceClient.client_secret! }).toString();
      const counterfeitToken = 'https://counterfeit.example/oauth/token';
      const issued = await absoluteFormRequest(server, 'POST', counterfeitToken, { 'content-type': 'application/x-www-form-urlencoded', dpop: await handMadeProof(keys, 'POST', counterfeitToken, undefined) }, tokenForm);
      expect(issued.status, issued.body).to.equal(400);
      expect(JSON.parse(issued.body)).to.include({ error: 'invalid_dpop_proof' });

      const discovery = await absoluteFormRequest(server, 'GET', 'http://counterfeit.example/.well-known/oauth-authorization-server', {});
      expect(discovery.status).to.equal(200);
      expect(JSON.parse(discovery.body)).to.include({ issuer: server.issuer, token_endpoint: `${server.issuer}/oauth/token` });
      // A scheme with no path of its own is read as the root, the home page: no 5xx.
      expect((await absoluteFormRequest(server, 'GET', 'x://y', {})).status).to.equal(200);
    });

    it('asks for a nonce when a proof is not recent, and takes the proof made with it', async () => {
      const keys = await proofKey();
      const { access_token: token } = await boundToken(keys);
      const url = `${server.issuer}/rest/companies`;
      const stale = await withProof(url, token, await handMadeProof(keys, 'GET', url, token, { iat: Math.floor(Date.now() / 1000) - 600 }));
      await refusedWith(stale.clone(), 401, 'use_dpop_nonce');
      const nonce = stale.headers.get('dpop-nonce');
      expect(nonce).to.be.a('string');
      expect(stale.headers.get('access-control-expose-headers')).to.include('DPoP-Nonce');
      expect((await withProof(url, token, await handMadeProof(keys, 'GET', url, token, { iat: Math.floor(Date.now() / 1000) - 600, nonce }))).status).to.equal(200);
      // A nonce one instance handed out is good at another.
      expect((await withProof(`${other.issuer}/rest/companies`, token, await handMadeProof(keys, 'GET', url, token, { nonce }))).status).to.equal(200);
      await refusedWith(await withProof(url, token, await handMadeProof(keys, 'GET', url, token, { nonce: 'made-up' })), 401, 'use_dpop_nonce');
    });

    it('refuses an unbound token sent as DPoP, and an API key sent as DPoP', async () => {
      const response = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', client_id: workspaceClient.client_id, client_secret: workspaceClient.client_secret! });
      const { access_token: bearer } = await response.json() as { access_token: string };
      const url = `${server.issuer}/rest/companies`;
      await refusedWith(await withProof(url, bearer, await handMadeProof(await proofKey(), 'GET', url, bearer)), 401, 'invalid_token');
      expect((await withProof(url, bearer, undefined, { scheme: 'Bearer' })).status).to.equal(200);

      const { key } = await createApiKey(server, user.workspaces[0]!.id);
      await refusedWith(await withProof(url, key, await handMadeProof(await proofKey(), 'GET', url, key)), 401, 'invalid_token');
      expect((await withProof(url, key, undefined, { scheme: 'Bearer' })).status).to.equal(200);
    });

    it('says in its metadata (RFC 9728) that it takes DPoP and which algorithms', async () => {
      const metadata = await (await fetch(`${server.origin}/.well-known/oauth-protected-resource/rest`)).json() as Record<string, unknown>;
      expect(metadata).to.include({ dpop_bound_access_tokens_required: false });
      expect(metadata.dpop_signing_alg_values_supported).to.deep.equal(['ES256', 'PS256', 'EdDSA', 'Ed25519']);
    });
  });

  describe('with a user\'s tokens (openid-client): the code flow, refresh, userinfo and /mcp', () => {
    it('binds the access and refresh tokens of a public client to its key; userinfo and /mcp take them with proofs', async () => {
      const client = await register(server.issuer, { client_name: 'DPoP SPA', token_endpoint_auth_method: 'none', redirect_uris: [REDIRECT_URI] });
      const { client_id: clientId } = await client.json() as RegisteredClient;
      const config = await openidClient.discovery(new URL(server.issuer), clientId, undefined, openidClient.None(), { execute: [openidClient.allowInsecureRequests] });
      const keys = await proofKey();
      const DPoP = openidClient.getDPoPHandle(config, keys);
      const verifier = openidClient.randomPKCECodeVerifier();
      const state = openidClient.randomState();
      // For the data API and /mcp (RFC 8707): the code is redeemed for the first, a refresh token for either.
      const url = openidClient.buildAuthorizationUrl(config, new URLSearchParams([
        ['redirect_uri', REDIRECT_URI], ['scope', 'openid profile api'], ['state', state], ['code_challenge', await openidClient.calculatePKCECodeChallenge(verifier)],
        ['code_challenge_method', 'S256'], ['resource', `${server.issuer}/rest`], ['resource', `${server.issuer}/mcp`],
      ]));
      const callback = await authorize(new UserAgent(), url.href, server.origin, { email: user.email, password: user.password });
      const tokens = await openidClient.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, undefined, { DPoP });
      expect(tokens.token_type.toLowerCase()).to.equal('dpop');
      expect(decodeJwt(tokens.access_token).cnf).to.have.property('jkt');

      const profile = await openidClient.fetchUserInfo(config, tokens.access_token, tokens.claims()!.sub, { DPoP });
      expect(profile.sub).to.equal(user.id);
      await refusedWith(await withProof(`${server.issuer}/oauth/userinfo`, tokens.access_token, undefined, { scheme: 'Bearer' }), 401, 'invalid_token');

      const mcp = await openidClient.fetchProtectedResource(config, tokens.access_token, new URL(`${server.issuer}/mcp`), 'POST', TOOLS_LIST, new Headers(MCP_HEADERS), { DPoP })
        .then(() => undefined, (error: unknown) => error);
      expect(mcp, 'a token for the data API is not one for /mcp').to.be.instanceOf(openidClient.WWWAuthenticateChallengeError);
      expect((mcp as openidClient.WWWAuthenticateChallengeError).status).to.equal(401);

      // The refresh token is bound too: refreshed with the same key only.
      const refreshed = await openidClient.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP });
      expect(decodeJwt(refreshed.access_token).cnf).to.deep.equal(decodeJwt(tokens.access_token).cnf);
      const otherKey = openidClient.getDPoPHandle(config, await proofKey());
      const stolen = await openidClient.refreshTokenGrant(config, refreshed.refresh_token!, undefined, { DPoP: otherKey }).then(() => undefined, (error: unknown) => error);
      expect(stolen).to.be.instanceOf(openidClient.ResponseBodyError);
      expect((stolen as openidClient.ResponseBodyError).error).to.equal('invalid_grant');

      const forMcp = await openidClient.refreshTokenGrant(config, refreshed.refresh_token!, { resource: `${server.issuer}/mcp` }, { DPoP });
      const listed = await openidClient.fetchProtectedResource(config, forMcp.access_token, new URL(`${server.issuer}/mcp`), 'POST', TOOLS_LIST, new Headers(MCP_HEADERS), { DPoP });
      expect(listed.status, await listed.clone().text()).to.equal(200);
      expect(JSON.stringify(await listed.json())).to.include('list_records');
      await refusedWith(await withProof(`${server.issuer}/mcp`, forMcp.access_token, undefined, { method: 'POST', scheme: 'Bearer', headers: MCP_HEADERS, body: TOOLS_LIST }), 401, 'invalid_token');
    });
  });

  describe('a public client that starts sending proofs at a refresh', () => {
    it('binds the refresh token issued then to the proof\'s key (RFC 9449 section 5): refreshed with that key only, never again as a bearer token', async () => {
      const client = await register(server.issuer, { client_name: 'DPoP Later SPA', token_endpoint_auth_method: 'none', redirect_uris: [REDIRECT_URI] });
      const { client_id: clientId } = await client.json() as RegisteredClient;
      const config = await openidClient.discovery(new URL(server.issuer), clientId, undefined, openidClient.None(), { execute: [openidClient.allowInsecureRequests] });
      const verifier = openidClient.randomPKCECodeVerifier();
      const state = openidClient.randomState();
      const url = openidClient.buildAuthorizationUrl(config, new URLSearchParams([
        ['redirect_uri', REDIRECT_URI], ['scope', 'api'], ['state', state], ['code_challenge', await openidClient.calculatePKCECodeChallenge(verifier)], ['code_challenge_method', 'S256'],
      ]));
      const callback = await authorize(new UserAgent(), url.href, server.origin, { email: user.email, password: user.password });
      const bearer = await openidClient.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state });
      expect(bearer.token_type.toLowerCase(), 'the code redeemed without a proof').to.equal('bearer');

      const DPoP = openidClient.getDPoPHandle(config, await proofKey());
      const bound = await openidClient.refreshTokenGrant(config, bearer.refresh_token!, undefined, { DPoP });
      expect(bound.token_type.toLowerCase()).to.equal('dpop');
      const refused = async (options: { DPoP?: openidClient.DPoPHandle }) => {
        const error = await openidClient.refreshTokenGrant(config, bound.refresh_token!, undefined, options).then(() => undefined, (caught: unknown) => caught);
        expect(error).to.be.instanceOf(openidClient.ResponseBodyError);
        return (error as openidClient.ResponseBodyError).error;
      };
      expect(await refused({}), 'as a bearer token').to.equal('invalid_grant');
      expect(await refused({ DPoP: openidClient.getDPoPHandle(config, await proofKey()) }), 'with another key').to.equal('invalid_grant');
      const again = await openidClient.refreshTokenGrant(config, bound.refresh_token!, undefined, { DPoP });
      expect(decodeJwt(again.access_token).cnf).to.deep.equal(decodeJwt(bound.access_token).cnf);
    });
  });

  describe('at the code exchange', () => {
    it('refuses no proof or a proof of another key for a code bound to a key (dpop_jkt), and a proof already used, before the code is used up: the retry with a good proof gets the tokens', async () => {
      const client = await register(server.issuer, { client_name: 'DPoP app', token_endpoint_auth_method: 'none', redirect_uris: [REDIRECT_URI] });
      const { client_id: clientId } = await client.json() as RegisteredClient;
      const keys = await proofKey();
      const dpopJkt = await calculateJwkThumbprint(await exportJWK(keys.publicKey));
      const tokenUrl = `${server.issuer}/oauth/token`;
      const codes: Array<{ code: string; verifier: string }> = [];
      for (let i = 0; i < 2; i += 1) {
        const verifier = `${randomUUID()}-${randomUUID()}`;
        const url = new URL(`${server.issuer}/oauth/authorize`);
        url.search = new URLSearchParams({
          client_id: clientId, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api', dpop_jkt: dpopJkt,
          code_challenge: hash('sha256', verifier, 'base64url'), code_challenge_method: 'S256',
        }).toString();
        const callback = await authorize(new UserAgent(), url.href, server.origin, { email: user.email, password: user.password });
        codes.push({ code: callback.searchParams.get('code')!, verifier });
      }
      const exchange = ({ code, verifier }: { code: string; verifier: string }) =>
        ({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: clientId, code_verifier: verifier });

      // A key no thumbprint can be made of: the engine's refusal of the proof, the code untouched.
      const noKey = await new SignJWT({ jti: randomUUID(), htm: 'POST', htu: tokenUrl, iat: Math.floor(Date.now() / 1000) })
        .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: { kty: 'EC', crv: 'P-256' } }).sign(keys.privateKey);
      await refusedWith(await tokenRequest(server.issuer, exchange(codes[0]!), { dpop: noKey }), 400, 'invalid_dpop_proof');
      const otherKey = await handMadeProof(await proofKey(), 'POST', tokenUrl, undefined);
      await refusedWith(await tokenRequest(server.issuer, exchange(codes[0]!), { dpop: otherKey }), 400, 'invalid_grant');
      await refusedWith(await tokenRequest(server.issuer, exchange(codes[0]!)), 400, 'invalid_grant');
      // The engine keeps why from the client (error_detail); the operator's log has it.
      for (const detail of ['DPoP proof key thumbprint does not match dpop_jkt', 'missing DPoP proof JWT']) {
        await eventually(`"${detail}" in the log`, () => server.logs().includes(detail) || undefined, 5_000);
      }
      const used = await handMadeProof(keys, 'POST', tokenUrl, undefined);
      expect((await tokenRequest(server.issuer, exchange(codes[0]!), { dpop: used })).status).to.equal(200);

      // The same proof again, for the other code.
      await refusedWith(await tokenRequest(server.issuer, exchange(codes[1]!), { dpop: used }), 400, 'invalid_grant');
      await eventually('the replay in the log', () => server.logs().includes('DPoP proof JWT Replay detected') || undefined, 5_000);
      const retried = await tokenRequest(server.issuer, exchange(codes[1]!), { dpop: await handMadeProof(keys, 'POST', tokenUrl, undefined) });
      const body = await retried.json() as { access_token: string };
      expect(retried.status, JSON.stringify(body)).to.equal(200);
      expect(decodeJwt(body.access_token).cnf).to.deep.equal({ jkt: dpopJkt });
    });
  });

  // Last: it registers an API the tests above do not expect.
  describe('for an API that takes DPoP-bound tokens only', () => {
    it('refuses a code exchange or refresh without a proof before the code or refresh token is used up: the retry with one gets the tokens', async () => {
      const resource = 'http://127.0.0.1:9/dpop-only-code-api';
      const created = await server.admin(['resource-server', 'create', '--name', 'DPoP-only API', '--resource', resource, '--require-dpop']);
      expect(created.code, created.stderr).to.equal(0);
      const client = await register(server.issuer, { client_name: 'DPoP agent', token_endpoint_auth_method: 'none', redirect_uris: [REDIRECT_URI] });
      const { client_id: clientId } = await client.json() as RegisteredClient;
      const config = await openidClient.discovery(new URL(server.issuer), clientId, undefined, openidClient.None(), { execute: [openidClient.allowInsecureRequests] });
      const DPoP = openidClient.getDPoPHandle(config, await proofKey());
      const verifier = openidClient.randomPKCECodeVerifier();
      const state = openidClient.randomState();
      const url = openidClient.buildAuthorizationUrl(config, new URLSearchParams([
        ['redirect_uri', REDIRECT_URI], ['scope', 'api'], ['state', state], ['code_challenge', await openidClient.calculatePKCECodeChallenge(verifier)],
        ['code_challenge_method', 'S256'], ['resource', resource],
      ]));
      const callback = await authorize(new UserAgent(), url.href, server.origin, { email: user.email, password: user.password });
      const code = callback.searchParams.get('code')!;

      const exchange = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: clientId, code_verifier: verifier };
      const refused = await refusedWith(await tokenRequest(server.issuer, exchange), 400, 'invalid_dpop_proof');
      expect(refused.error_description).to.contain(resource);
      const tokens = await openidClient.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, undefined, { DPoP });
      expect(decodeJwt(tokens.access_token)).to.include({ aud: resource, scope: 'api' });

      // The refresh token is bound to the client's key: without a proof the engine refuses it as it
      // refuses any refresh token bound to a key (telling its holder nothing of its grant), uses nothing up.
      await refusedWith(await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: clientId }), 400, 'invalid_grant');
      const refreshed = await openidClient.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP });
      expect(decodeJwt(refreshed.access_token)).to.include({ aud: resource });
    });
  });
});

/** DPOP_REQUIRED and DPOP_NONCE_REQUIRED: the APIs take DPoP-bound tokens only, and every proof carries a nonce. */
describe('DPoP required, with nonces', function () {
  this.timeout(60_000);
  let server: TestServer;
  let as: oauth.AuthorizationServer;
  let client: RegisteredClient;

  before(async () => {
    server = await startServer({ env: { DPOP_REQUIRED: 'on', DPOP_NONCE_REQUIRED: 'on' } });
    const user = await seedUser(server);
    client = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
    const issuer = new URL(server.issuer);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
  });

  after(async () => {
    await server?.stop();
  });

  const form = () => ({ grant_type: 'client_credentials', scope: 'api', client_id: client.client_id, client_secret: client.client_secret! });

  it('issues no token for the data API without a proof', async () => {
    await refusedWith(await tokenRequest(server.issuer, form()), 400, 'invalid_dpop_proof');
  });

  it('asks for a nonce at the token endpoint and at the data API; oauth4webapi retries with it', async () => {
    const keys = await proofKey();
    const withoutNonce = await tokenRequest(server.issuer, form(), { dpop: await handMadeProof(keys, 'POST', `${server.issuer}/oauth/token`, undefined) });
    await refusedWith(withoutNonce.clone(), 400, 'use_dpop_nonce');
    expect(withoutNonce.headers.get('dpop-nonce')).to.be.a('string');

    const library: oauth.Client = { client_id: client.client_id };
    const DPoP = oauth.DPoP(library, keys);
    const request = () => oauth.clientCredentialsGrantRequest(as, library, oauth.ClientSecretPost(client.client_secret!), { scope: 'api' }, { DPoP, ...insecure });
    const first = await oauth.processClientCredentialsResponse(as, library, await request()).then(() => undefined, (error: unknown) => error);
    expect(oauth.isDPoPNonceError(first)).to.equal(true);
    const { access_token: token } = await oauth.processClientCredentialsResponse(as, library, await request());

    const url = new URL(`${server.issuer}/rest/companies`);
    const refused = await oauth.protectedResourceRequest(token, 'GET', url, new Headers(), null, { DPoP, ...insecure }).then(() => undefined, (error: unknown) => error);
    expect(oauth.isDPoPNonceError(refused), 'the API\'s own nonce asked for').to.equal(true);
    expect((await oauth.protectedResourceRequest(token, 'GET', url, new Headers(), null, { DPoP, ...insecure })).status).to.equal(200);
  });

  it('refuses a bearer token and says so in its challenge and its metadata', async () => {
    const response = await fetch(`${server.issuer}/rest/companies`, { headers: { authorization: 'Bearer made-up' } });
    expect(response.status).to.equal(401);
    expect(challengeOf(response, 'Bearer')).to.equal(undefined);
    expect(challengeOf(response, 'DPoP')).to.include('algs=').and.include('resource_metadata=');
    const metadata = await (await fetch(`${server.origin}/.well-known/oauth-protected-resource/mcp`)).json() as Record<string, unknown>;
    expect(metadata).to.include({ dpop_bound_access_tokens_required: true });
  });

  it('lets an operator register an API that requires DPoP: its tokens come only with a proof, and introspection says they are bound', async () => {
    const resource = 'http://127.0.0.1:9/dpop-only-api';
    const created = await server.admin(['resource-server', 'create', '--name', 'DPoP-only API', '--resource', resource, '--require-dpop', '--json']);
    expect(created.code, created.stderr).to.equal(0);
    const rs = JSON.parse(created.stdout) as { client_id: string; client_secret: string; dpop_required: boolean };
    expect(rs.dpop_required).to.equal(true);
    await refusedWith(await tokenRequest(server.issuer, { ...form(), resource }), 400, 'invalid_dpop_proof');

    const keys = await proofKey();
    const { access_token: token } = await boundClientCredentials(as, client, keys, { resource });
    const introspection = await oauth.processIntrospectionResponse(as, { client_id: rs.client_id }, await oauth.introspectionRequest(as, { client_id: rs.client_id }, oauth.ClientSecretBasic(rs.client_secret), token, insecure));
    expect(introspection).to.include({ active: true, token_type: 'DPoP', aud: resource });
    expect(introspection.cnf).to.deep.equal({ jkt: await calculateJwkThumbprint(await exportJWK(keys.publicKey)) });
  });
});
