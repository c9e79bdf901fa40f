import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';
import { decodeJwt } from 'jose';
import type { User, UserManager, UserManagerSettings } from 'oidc-client-ts';
import type { ConsoleMessage, Page, Request as PageRequest, Response as PageResponse } from 'playwright-core';

import { browserForSuite, recordRequests } from '../support/browser.ts';
import { codeRequest, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { freePort, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * A stock single-page app: oidc-client-ts's browser bundle, untouched, in Debian Chromium, served
 * from another origin than the server (its own node:http server on another loopback port) as a
 * public client (token_endpoint_auth_method none). Everything the library does from the page
 * (discovery, the code exchange, userinfo, the refresh, the revocation) is a cross-origin fetch,
 * so it only works if the server answers with CORS headers the browser accepts.
 */

const BUNDLE = fileURLToPath(new URL('../../node_modules/oidc-client-ts/dist/browser/oidc-client-ts.min.js', import.meta.url));

/** What the SPA's pages put on `window` (the bundle's global `oidc`, and the app's own `spa`). */
interface SpaWindow {
  oidc: { User: new (settings: ConstructorParameters<typeof User>[0]) => User };
  spa: { manager: UserManager };
}

/** The serialisable part of oidc-client-ts's `User`. */
interface SpaUser {
  access_token: string;
  refresh_token: string | null;
  id_token: string | null;
  token_type: string;
  scope: string | null;
  expires_in: number | null;
  profile: Record<string, unknown>;
}

/** The page's own settings for `UserManager`, the same on every page of the app. */
function appScript(settings: UserManagerSettings): string {
  return `
    window.spa = {
      manager: new oidc.UserManager({
        ...${JSON.stringify(settings)},
        userStore: new oidc.WebStorageStateStore({ store: window.localStorage }),
      }),
    };
  `;
}

const INDEX = `<!doctype html><html><head><title>SPA</title><script src="/oidc-client-ts.min.js"></script><script src="/app.js"></script></head>
<body><button id="signin" onclick="spa.manager.signinRedirect()">Sign in</button></body></html>`;

// The redirect URI: completes the sign-in with the library and shows the outcome.
const CALLBACK = `<!doctype html><html><head><title>Callback</title><script src="/oidc-client-ts.min.js"></script><script src="/app.js"></script></head>
<body><pre id="result"></pre><script>
  spa.manager.signinCallback().then(
    (user) => { document.getElementById('result').textContent = JSON.stringify({ ok: true, sub: user.profile.sub }); },
    (error) => { document.getElementById('result').textContent = JSON.stringify({ ok: false, error: String(error && (error.error || error.message) || error) }); },
  );
</script></body></html>`;

/** The SPA's origin: the pages, the library bundle and the app script; nothing else. */
async function startSpa(port: number, settings: () => UserManagerSettings): Promise<Server> {
  const bundle = await readFile(BUNDLE);
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://spa').pathname;
    const send = (type: string, body: string | Buffer) => {
      response.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' });
      response.end(body);
    };
    if (path === '/') send('text/html; charset=utf-8', INDEX);
    else if (path === '/callback.html') send('text/html; charset=utf-8', CALLBACK);
    else if (path === '/oidc-client-ts.min.js') send('text/javascript', bundle);
    else if (path === '/app.js') send('text/javascript', appScript(settings()));
    else {
      response.writeHead(path === '/favicon.ico' ? 204 : 404);
      response.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

describe('a stock single-page app (oidc-client-ts in Chromium) on another origin', function () {
  this.timeout(30_000);

  let server: TestServer;
  let spa: Server;
  let spaOrigin: string;
  let spaPort: number;
  let client: RegisteredClient;
  let user: SeededUser;
  const browser = browserForSuite();

  before(async () => {
    spaPort = await freePort();
    spaOrigin = `http://127.0.0.1:${spaPort}`;
    [server, spa] = await Promise.all([
      startServer(),
      startSpa(spaPort, () => ({
        authority: server.issuer,
        client_id: client.client_id,
        redirect_uri: `${spaOrigin}/callback.html`,
        response_type: 'code',
        scope: 'openid profile api',
        loadUserInfo: true,
        automaticSilentRenew: false,
      })),
    ]);
    user = await seedUser(server, [{ workspace: 'SPA Co', role: 'member' }]);
    client = await registerClient(server.issuer, {
      client_name: 'Single-page app',
      redirect_uris: [`${spaOrigin}/callback.html`],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'none',
    });
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-40).join('\n'));
  });

  after(async () => {
    await new Promise((resolve) => spa ? spa.close(resolve) : resolve(undefined));
    await server?.stop();
  });

  /**
   * Every console error, script error and failed request while the page shows the SPA (the
   * server's own login and consent pages are tested elsewhere), and every response from the server
   * to a fetch made by the SPA.
   */
  function watch(page: Page): { errors: string[]; crossOrigin: Array<{ method: string; url: string; status: number; allowOrigin: string | undefined }> } {
    const errors: string[] = [];
    const crossOrigin: Array<{ method: string; url: string; status: number; allowOrigin: string | undefined }> = [];
    const onSpa = () => page.url().startsWith(`${spaOrigin}/`);
    page.on('console', (message: ConsoleMessage) => {
      if (message.type() === 'error' && onSpa()) errors.push(`${message.location().url}: ${message.text()}`);
    });
    page.on('pageerror', (error) => { if (onSpa()) errors.push(`pageerror: ${error.message}`); });
    page.on('requestfailed', (request: PageRequest) => { if (onSpa()) errors.push(`failed ${request.method()} ${request.url()}: ${request.failure()?.errorText}`); });
    page.on('response', (response: PageResponse) => {
      const request = response.request();
      if (request.resourceType() !== 'fetch' && request.resourceType() !== 'xhr') return;
      if (!response.url().startsWith(`${server.origin}/`)) return;
      crossOrigin.push({ method: request.method(), url: response.url(), status: response.status(), allowOrigin: response.headers()['access-control-allow-origin'] });
    });
    return { errors, crossOrigin };
  }

  const currentUser = (page: Page) => page.evaluate(async () => {
    const found = await (window as unknown as SpaWindow).spa.manager.getUser();
    if (!found) return null;
    const { access_token, refresh_token, id_token, token_type, scope, expires_in, profile } = found;
    return { access_token, refresh_token: refresh_token ?? null, id_token: id_token ?? null, token_type, scope: scope ?? null, expires_in: expires_in ?? null, profile: { ...profile } } satisfies SpaUser;
  });

  /** A fetch from the SPA's page (so it is cross-origin, with CORS): status and body text, or the error the browser gave. */
  const pageFetch = (page: Page, url: string, init: { method?: string; headers?: Record<string, string>; body?: string }) =>
    page.evaluate(async ({ url: target, init: options }) => {
      try {
        const response = await fetch(target, options);
        return { status: response.status, body: await response.text() };
      } catch (error) {
        return { status: 0, body: String(error) };
      }
    }, { url, init });

  it('signs in with code + PKCE, loads userinfo, calls the data API, refreshes, revokes; the revoked refresh token is refused', async () => {
    const page = await browser.open();
    const seen = watch(page);
    const requests = recordRequests(page);

    // Sign in: the app's button runs signinRedirect (discovery, then the authorization request).
    await page.goto(`${spaOrigin}/`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((url) => url.href.startsWith(`${server.origin}/`));
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: /^Authorize\b/ }).waitFor();
    await page.getByRole('button', { name: 'Allow', exact: true }).click();

    // Back on the SPA: signinCallback exchanged the code (PKCE, no secret) and loaded userinfo.
    await page.waitForURL((url) => url.href.startsWith(`${spaOrigin}/callback.html?`));
    const callbackUrl = new URL(page.url());
    expect(callbackUrl.searchParams.get('iss')).to.equal(server.issuer);
    await page.locator('#result').filter({ hasText: /./ }).waitFor();
    const outcome = JSON.parse(await page.locator('#result').innerText()) as { ok: boolean; sub?: string; error?: string };
    expect(outcome, JSON.stringify(outcome)).to.deep.equal({ ok: true, sub: user.id });

    // The library sent an authorization request with PKCE S256, and redeemed the code with its verifier and no secret.
    const authorizationRequest = requests.find((request) => request.url().startsWith(`${server.issuer}/oauth/authorize?`));
    const sent = new URL(authorizationRequest!.url()).searchParams;
    expect(sent.get('client_id')).to.equal(client.client_id);
    expect(sent.get('response_type')).to.equal('code');
    expect(sent.get('code_challenge_method')).to.equal('S256');
    expect(sent.get('code_challenge')).to.match(/^[\w-]{43}$/);
    expect(sent.get('scope')).to.equal('openid profile api');
    const exchange = requests.find((request) => request.method() === 'POST' && request.url() === `${server.issuer}/oauth/token`);
    const exchangeForm = new URLSearchParams(exchange!.postData() ?? '');
    expect(exchangeForm.get('grant_type')).to.equal('authorization_code');
    expect(exchangeForm.get('code_verifier')).to.be.a('string');
    expect(exchangeForm.get('client_id')).to.equal(client.client_id);
    expect(exchangeForm.has('client_secret')).to.equal(false);
    expect(await exchange!.headerValue('authorization')).to.equal(null);

    const signedIn = await currentUser(page);
    if (!signedIn) throw new Error('no user stored after the callback');
    expect(signedIn.token_type.toLowerCase()).to.equal('bearer');
    expect(signedIn.scope).to.equal('openid profile api');
    expect(signedIn.refresh_token, 'a refresh token for a client registered with refresh_token').to.be.a('string');
    expect(signedIn.id_token).to.be.a('string');
    expect(signedIn.profile.sub).to.equal(user.id);
    // The profile, merged by the library from the ID token and userinfo (loadUserInfo), which it read across origins.
    const userinfoCalls = seen.crossOrigin.filter(({ method, url }) => method === 'GET' && url === `${server.issuer}/oauth/userinfo`);
    expect(userinfoCalls.map(({ status }) => status), 'userinfo fetched by the library').to.deep.equal([200]);
    expect(signedIn.profile.email).to.equal(user.email);
    expect(signedIn.profile.name).to.equal(user.name);
    expect(signedIn.profile.workspace).to.deep.equal({ id: user.workspaces[0]!.id, name: 'SPA Co', role: 'member' });
    const claims = decodeJwt(signedIn.access_token);
    expect(claims.aud).to.equal(`${server.issuer}/rest`);
    expect(claims.client_id).to.equal(client.client_id);
    expect(claims.workspace_id).to.equal(user.workspaces[0]!.id);

    // The access token works on the data API, called from the page.
    const companies = `${server.issuer}/rest/companies`;
    const created = await pageFetch(page, companies, {
      method: 'POST',
      headers: { authorization: `Bearer ${signedIn.access_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Made from a SPA' }),
    });
    expect(created.status, created.body).to.equal(201);

    // Refresh: signinSilent with a refresh token stored uses the refresh_token grant (no iframe).
    const refreshedSub = await page.evaluate(async () => (await (window as unknown as SpaWindow).spa.manager.signinSilent())?.profile.sub ?? null);
    expect(refreshedSub).to.equal(user.id);
    const refreshed = await currentUser(page);
    if (!refreshed) throw new Error('no user stored after the refresh');
    expect(refreshed.access_token).not.to.equal(signedIn.access_token);
    expect(refreshed.refresh_token, 'rotated').to.be.a('string').and.not.equal(signedIn.refresh_token);
    expect(refreshed.profile.email, 'the profile survives the refresh').to.equal(user.email);
    const listed = await pageFetch(page, companies, { headers: { authorization: `Bearer ${refreshed.access_token}` } });
    expect(listed.status, listed.body).to.equal(200);
    expect((JSON.parse(listed.body) as { data: { companies: Array<{ name: string }> } }).data.companies.map((c) => c.name)).to.include('Made from a SPA');

    // Revocation: revokeTokens() posts the access token, then the refresh token, to the revocation endpoint.
    await page.evaluate(() => (window as unknown as SpaWindow).spa.manager.revokeTokens());
    const afterRevocation = await currentUser(page);
    expect(afterRevocation?.refresh_token, 'the library drops the revoked refresh token').to.equal(null);

    // The revoked tokens no longer work: the library's own refresh with the revoked refresh token
    // (put back in the store, as a stale tab would have it) fails with invalid_grant ...
    const retried = await page.evaluate(async (stale) => {
      const { oidc, spa: app } = window as unknown as SpaWindow;
      await app.manager.storeUser(new oidc.User({
        access_token: stale.access_token,
        refresh_token: stale.refresh_token ?? undefined,
        id_token: stale.id_token ?? undefined,
        token_type: stale.token_type,
        scope: stale.scope ?? undefined,
        profile: stale.profile as ConstructorParameters<typeof User>[0]['profile'],
        expires_at: Math.floor(Date.now() / 1000) + 3600,
      }));
      try {
        await app.manager.signinSilent();
        return 'refreshed';
      } catch (error) {
        return String((error as { error?: string }).error ?? error);
      }
    }, refreshed);
    expect(retried).to.equal('invalid_grant');
    // ... and the data API and userinfo refuse the access token.
    const refused = await pageFetch(page, companies, { headers: { authorization: `Bearer ${refreshed.access_token}` } });
    expect(refused.status, refused.body).to.equal(401);
    const userinfo = await pageFetch(page, `${server.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${refreshed.access_token}` } });
    expect(userinfo.status, userinfo.body).to.equal(401);

    // Every call the library made went to the server across origins, and the browser let the page read each answer.
    const calls = seen.crossOrigin.map(({ method, url }) => `${method} ${new URL(url).pathname}`);
    for (const expected of [
      'GET /.well-known/openid-configuration',
      'POST /oauth/token',
      'GET /oauth/userinfo',
      'POST /oauth/revoke',
    ]) expect(calls, `the SPA called ${expected}`).to.include(expected);
    const revocations = seen.crossOrigin.filter(({ method, url }) => method === 'POST' && url === `${server.issuer}/oauth/revoke`);
    expect(revocations.map(({ status }) => status), 'the access token, then the refresh token, revoked').to.deep.equal([200, 200]);
    for (const response of seen.crossOrigin) {
      expect([spaOrigin, '*'], `Access-Control-Allow-Origin of ${response.method} ${response.url}`).to.include(response.allowOrigin);
    }
    // The console shows no CORS error, no failed request, no script error: only the three refusals asked for above.
    expect(seen.errors, seen.errors.join('\n')).to.deep.equal([
      `${server.issuer}/oauth/token: Failed to load resource: the server responded with a status of 400 (Bad Request)`,
      `${server.issuer}/rest/companies: Failed to load resource: the server responded with a status of 401 (Unauthorized)`,
      `${server.issuer}/oauth/userinfo: Failed to load resource: the server responded with a status of 401 (Unauthorized)`,
    ]);
  });
  it("lets a page on a confidential client's redirect URI origin read the token, refresh and revocation answers (client_secret_post and Basic), and a page elsewhere none", async () => {
    const redirectUri = `${spaOrigin}/callback.html`;
    const host = await registerClient(server.issuer, { client_name: 'Browser host with a secret', redirect_uris: [redirectUri] });
    expect(host.client_secret, 'registered as a confidential client').to.be.a('string');
    const request = codeRequest(server.issuer, host.client_id, { redirect_uri: redirectUri });
    const callback = await authorize(new UserAgent(), request.url, server.origin, { email: user.email, password: user.password });
    const code = callback.searchParams.get('code');
    expect(code, callback.href).to.be.a('string');

    const tokenEndpoint = `${server.issuer}/oauth/token`;
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const basic = `Basic ${Buffer.from(`${encodeURIComponent(host.client_id)}:${encodeURIComponent(host.client_secret!)}`).toString('base64')}`;
    const page = await browser.open();
    await page.goto(`${spaOrigin}/`);
    const exchanged = await pageFetch(page, tokenEndpoint, { method: 'POST', headers: form, body: new URLSearchParams({
      grant_type: 'authorization_code', code: code!, redirect_uri: redirectUri, code_verifier: request.verifier, client_id: host.client_id, client_secret: host.client_secret!,
    }).toString() });
    expect(exchanged.status, exchanged.body).to.equal(200);
    const first = JSON.parse(exchanged.body) as { access_token: string; refresh_token: string };
    // With Basic the browser asks first (a preflight for the Authorization header).
    const refreshed = await pageFetch(page, tokenEndpoint, { method: 'POST', headers: { ...form, authorization: basic }, body: new URLSearchParams({
      grant_type: 'refresh_token', refresh_token: first.refresh_token,
    }).toString() });
    expect(refreshed.status, refreshed.body).to.equal(200);
    const second = JSON.parse(refreshed.body) as { access_token: string; refresh_token: string };
    expect(second.refresh_token).to.not.equal(first.refresh_token);

    // Another origin (the same app under localhost): the browser lets it read nothing.
    const elsewhere = await browser.open();
    await elsewhere.goto(`http://localhost:${spaPort}/`);
    const foreign = await pageFetch(elsewhere, tokenEndpoint, { method: 'POST', headers: { ...form, authorization: basic }, body: new URLSearchParams({
      grant_type: 'refresh_token', refresh_token: second.refresh_token,
    }).toString() });
    expect(foreign.status, foreign.body).to.equal(0);

    const revoked = await pageFetch(page, `${server.issuer}/oauth/revoke`, { method: 'POST', headers: { ...form, authorization: basic }, body: new URLSearchParams({ token: second.refresh_token }).toString() });
    expect(revoked.status, revoked.body).to.equal(200);
    const afterRevocation = await pageFetch(page, tokenEndpoint, { method: 'POST', headers: { ...form, authorization: basic }, body: new URLSearchParams({
      grant_type: 'refresh_token', refresh_token: second.refresh_token,
    }).toString() });
    expect([afterRevocation.status, (JSON.parse(afterRevocation.body) as { error: string }).error], 'the refusal is readable too').to.deep.equal([400, 'invalid_grant']);
  });
});
