import { expect } from 'chai';
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';

import { codeRequest, exchangeCode, REDIRECT_URI, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * Individual claims requested by name (the `claims` parameter, OpenID Connect Core 5.5; the
 * conformance module oidcc-claims-essential), the standard profile claims, and how the user was
 * authenticated (`acr`, `amr`) in ID tokens, through real flows over HTTP.
 */
describe('claims parameter, profile claims and authentication context', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;
  let discovery: Record<string, unknown>;

  before(async function () {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Claims Co' }]);
    discovery = await (await fetch(`${server.issuer}/.well-known/openid-configuration`)).json() as Record<string, unknown>;
  });

  after(async function () {
    await server?.stop();
  });

  interface Tokens { access_token: string; id_token: string; refresh_token?: string }

  async function signedIn(client: RegisteredClient, params: Record<string, string | undefined>, agent = new UserAgent()): Promise<Tokens> {
    const auth = codeRequest(server.issuer, client.client_id, { scope: 'openid', nonce: 'n1', ...params });
    const callback = await authorize(agent, auth.url, server.origin, user);
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`no code: ${callback.href}`);
    const response = await exchangeCode(server.issuer, client, code, auth.verifier);
    expect(response.status).to.equal(200);
    return response.json() as Promise<Tokens>;
  }

  async function userinfo(accessToken: string): Promise<Record<string, unknown>> {
    const response = await fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(response.status).to.equal(200);
    return response.json() as Promise<Record<string, unknown>>;
  }

  async function idToken(tokens: Tokens, client: RegisteredClient): Promise<Record<string, unknown>> {
    const keys = createRemoteJWKSet(new URL(String(discovery.jwks_uri)));
    const { payload } = await jwtVerify(tokens.id_token, keys, { issuer: server.issuer, audience: client.client_id });
    return payload;
  }

  /** The consent page the user is shown for a request (signed in on the way), as text. */
  async function consentText(agent: UserAgent, url: string): Promise<string> {
    let { response } = await agent.follow(url, server.origin);
    let html = await response.text();
    const action = /<form method="post" action="([^"]+)"/.exec(html)?.[1];
    if (action?.endsWith('/login')) {
      const csrf = /name="csrf" value="([^"]*)"/.exec(html)![1]!;
      const posted = await agent.request(new URL(action, server.origin).href, { form: { csrf, email: user.email, password: user.password } });
      ({ response } = await agent.follow(new URL(posted.headers.get('location')!, server.origin).href, server.origin));
      html = await response.text();
    }
    return html.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');
  }

  it('advertises the claims parameter, every profile claim and the authentication context class', function () {
    expect(discovery.claims_parameter_supported).to.equal(true);
    expect(discovery.claims_supported).to.include.members(['sub', 'name', 'given_name', 'family_name', 'preferred_username', 'updated_at', 'email', 'email_verified', 'acr']);
    expect(discovery.acr_values_supported).to.deep.equal(['urn:workspace-oauth-server:acr:password']);
  });

  it('releases a userinfo claim asked for by name without the profile scope, and only that one; the ID token does not carry it', async function () {
    const client = await registerClient(server.issuer);
    const claims = JSON.stringify({ userinfo: { name: { essential: true } } });
    const agent = new UserAgent();
    const auth = codeRequest(server.issuer, client.client_id, { scope: 'openid', claims });
    expect(await consentText(agent, auth.url)).to.include('See these details of your profile: name');

    const tokens = await signedIn(client, { claims }, agent);
    expect(await userinfo(tokens.access_token)).to.deep.equal({ sub: user.id, name: user.name });
    expect(await idToken(tokens, client)).to.not.have.property('name');

    const refreshed = await (await fetch(`${server.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: client.client_id, client_secret: client.client_secret! }),
    })).json() as Tokens;
    expect(await userinfo(refreshed.access_token), 'after a refresh').to.deep.equal({ sub: user.id, name: user.name });
  });

  it('puts ID token claims asked for by name in the ID token, not in userinfo', async function () {
    const client = await registerClient(server.issuer);
    const tokens = await signedIn(client, { claims: JSON.stringify({ id_token: { email: null, workspace: null } }) });
    const payload = await idToken(tokens, client);
    expect(payload.email).to.equal(user.email);
    expect(payload.workspace).to.deep.include({ name: 'Claims Co', role: 'admin' });
    expect(await userinfo(tokens.access_token)).to.deep.equal({ sub: user.id });
  });

  it('gives only sub without the profile scope or named claims, and ignores claims it does not hold', async function () {
    const client = await registerClient(server.issuer);
    const plain = await signedIn(client, {});
    expect(await userinfo(plain.access_token)).to.deep.equal({ sub: user.id });
    expect(decodeJwt(plain.access_token)).to.not.have.property('userinfo_claims');

    const unknown = await signedIn(client, { claims: JSON.stringify({ userinfo: { phone_number: { essential: true }, address: null } }) });
    expect(await userinfo(unknown.access_token)).to.deep.equal({ sub: user.id });
  });

  it('asks for consent again when a later request names a claim the grant lacks', async function () {
    const client = await registerClient(server.issuer);
    const agent = new UserAgent();
    await signedIn(client, { claims: JSON.stringify({ userinfo: { name: null } }) }, agent);

    const again = codeRequest(server.issuer, client.client_id, { scope: 'openid', claims: JSON.stringify({ userinfo: { email: null } }) });
    expect(await consentText(agent, again.url)).to.include('See these details of your profile: email address');
    const tokens = await signedIn(client, { claims: JSON.stringify({ userinfo: { email: null } }) }, agent);
    expect(await userinfo(tokens.access_token)).to.deep.equal({ sub: user.id, email: user.email });
  });

  it('refuses a claims parameter that is not a JSON object with invalid_request, redirected to a vetted client', async function () {
    const client = await registerVettedClient(server);
    const auth = codeRequest(server.issuer, client.client_id, { scope: 'openid', claims: '{"userinfo": ' });
    const response = await fetch(auth.url, { redirect: 'manual' });
    const location = new URL(response.headers.get('location')!);
    expect(location.searchParams.get('error')).to.equal('invalid_request');
    expect(location.searchParams.get('error_description')).to.match(/claims/);
  });

  it('releases the standard profile claims it holds with the profile scope: preferred_username, updated_at, email_verified false', async function () {
    const client = await registerClient(server.issuer);
    const before = Math.floor(Date.now() / 1000);
    const tokens = await signedIn(client, { scope: 'openid profile' });
    const claims = await userinfo(tokens.access_token);
    expect(claims).to.include({ sub: user.id, name: user.name, given_name: 'Test', email: user.email, preferred_username: user.email, email_verified: false });
    expect(claims.updated_at).to.be.a('number').and.to.be.at.most(before + 1).and.at.least(before - 3600);
  });

  it('states in the ID token that the user signed in with a password (acr, amr), also when the client asks for that class', async function () {
    const client = await registerClient(server.issuer);
    const plainTokens = await signedIn(client, {});
    const plain = await idToken(plainTokens, client);
    expect(plain.acr).to.equal('urn:workspace-oauth-server:acr:password');
    expect(plain.amr).to.deep.equal(['pwd']);
    expect(plain.auth_time, 'when the user signed in').to.be.a('number');

    const asked = await idToken(await signedIn(client, { acr_values: 'urn:workspace-oauth-server:acr:password' }), client);
    expect(asked.acr).to.equal('urn:workspace-oauth-server:acr:password');
  });

  it('answers a request insisting on an authentication class it does not offer with access_denied, signed in or not, instead of asking to sign in again and again', async function () {
    const client = await registerVettedClient(server);
    const insisting = (acr: Record<string, unknown>) => codeRequest(server.issuer, client.client_id, { scope: 'openid', nonce: 'n2', claims: JSON.stringify({ id_token: { acr: { essential: true, ...acr } } }) }).url;
    const signedInAgent = new UserAgent();
    await signedIn(client, {}, signedInAgent);
    for (const [who, agent] of [['no session', new UserAgent()], ['signed in', signedInAgent]] as const) {
      for (const acr of [{ value: 'urn:example:mfa' }, { values: ['urn:example:mfa', 'urn:example:hardware-key'] }]) {
        const { url } = await agent.follow(insisting(acr), server.origin);
        const back = new URL(url);
        expect(`${back.origin}${back.pathname}`, `${who}, ${JSON.stringify(acr)}: ${url}`).to.equal(REDIRECT_URI);
        expect(back.searchParams.get('error'), who).to.equal('access_denied');
      }
    }
    // The class it does offer, insisted on, is met by signing in.
    const met = await signedIn(client, { claims: JSON.stringify({ id_token: { acr: { essential: true, values: ['urn:example:mfa', 'urn:workspace-oauth-server:acr:password'] } } }) });
    expect((await idToken(met, client)).acr).to.equal('urn:workspace-oauth-server:acr:password');
  });

  it('answers offline_access (OpenID Connect Core 11) alike with prompt=consent, as that section says to send it, and without: a refresh token, and a scope without it', async function () {
    const client = await registerVettedClient(server);
    for (const params of [{ scope: 'openid offline_access', prompt: 'consent' }, { scope: 'openid offline_access' }, { scope: 'offline_access', prompt: 'consent', nonce: undefined }]) {
      const tokens = await signedIn(client, params) as Tokens & { scope: string };
      expect(tokens.refresh_token, JSON.stringify(params)).to.be.a('string');
      expect(tokens.scope, JSON.stringify(params)).to.equal(params.scope === 'offline_access' ? 'api' : 'openid');
    }
  });
});
