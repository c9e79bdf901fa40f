import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';
import * as client from 'openid-client';

import { REDIRECT_URI, codeRequest, exchangeCode, introspect, postCredentials, register, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * Sign-out (OpenID Connect RP-Initiated Logout 1.0) over HTTP: registration of
 * post_logout_redirect_uris, the confirmation, what ends (the browser's session) and what does not
 * (tokens already issued), where the browser is sent afterwards. The pages themselves are driven
 * in Chromium in test/logout.browser.test.ts.
 */

const SIGNED_OUT_URI = 'http://127.0.0.1:9/signed-out';
/** What a browser's navigation asks for: the engine answers its errors with a page rather than JSON. */
const BROWSER = { accept: 'text/html,application/xhtml+xml' };

interface Tokens {
  access_token: string;
  refresh_token: string;
  id_token?: string;
}

/** What the confirmation page gives the browser: the engine's confirm URL and its xsrf value. */
function logoutForm(html: string): { action: string; xsrf: string } {
  const action = /<form id="op\.logoutForm" method="post" action="([^"]+)"/.exec(html)?.[1];
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(html)?.[1];
  if (!action || !xsrf) throw new Error(`no logout form in:\n${html.slice(0, 500)}`);
  return { action, xsrf };
}

describe('sign-out (RP-Initiated Logout) over HTTP', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;
  let app: RegisteredClient;

  before(async () => {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Logout Co' }]);
    app = await registerClient(server.issuer, { client_name: 'Logout App', post_logout_redirect_uris: [SIGNED_OUT_URI] });
  });

  after(async () => {
    await server?.stop();
  });

  const logoutUrl = (params: Record<string, string> = {}) => {
    const url = new URL(`${server.issuer}/oauth/logout`);
    for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
    return url.href;
  };

  /** Signs in through the authorization endpoint (login and consent) and redeems the code. */
  async function signIn(agent: UserAgent, scope = 'openid api profile'): Promise<Tokens> {
    const request = codeRequest(server.issuer, app.client_id, { scope });
    const callback = await authorize(agent, request.url, server.origin, { email: user.email, password: user.password });
    const response = await exchangeCode(server.issuer, app, callback.searchParams.get('code')!, request.verifier);
    expect(response.status, await response.clone().text()).to.equal(200);
    return response.json() as Promise<Tokens>;
  }

  /** Where a new authorization request takes the browser: the login page, or straight back to the client. */
  async function nextAuthorization(agent: UserAgent): Promise<'login' | 'signed in'> {
    const { url, response } = await agent.follow(codeRequest(server.issuer, app.client_id).url, server.origin);
    if (url.startsWith(REDIRECT_URI) && new URL(url).searchParams.has('code')) return 'signed in';
    const html = await response.text();
    if (/<h1>Sign in<\/h1>/.test(html)) return 'login';
    throw new Error(`neither the login page nor a code: ${url}\n${html.slice(0, 300)}`);
  }

  /** Opens the logout endpoint (signed in: the confirmation page) and answers it. */
  async function confirm(agent: UserAgent, choice: 'sign out' | 'stay', params: Record<string, string> = {}): Promise<Response> {
    const page = await agent.request(logoutUrl(params));
    expect(page.status).to.equal(200);
    const html = await page.text();
    expect(html).to.include('Sign out of');
    const { action, xsrf } = logoutForm(html);
    return agent.request(action, { form: choice === 'sign out' ? { xsrf, logout: 'yes' } : { xsrf } });
  }

  describe('discovery and registration', () => {
    it('discovery advertises end_session_endpoint, and openid-client builds a logout URL to it', async () => {
      const config = await client.discovery(new URL(server.issuer), app.client_id, app.client_secret, undefined, { execute: [client.allowInsecureRequests] });
      expect(config.serverMetadata().end_session_endpoint).to.equal(`${server.issuer}/oauth/logout`);
      const url = client.buildEndSessionUrl(config, { post_logout_redirect_uri: SIGNED_OUT_URI, state: 'abc' });
      expect(`${url.origin}${url.pathname}`).to.equal(`${server.issuer}/oauth/logout`);
      expect(url.searchParams.get('client_id')).to.equal(app.client_id);
    });

    it('registers post_logout_redirect_uris under the redirect URI rules: https, http on loopback, a private-use scheme', async () => {
      for (const uri of ['https://app.example.com/signed-out', 'http://localhost:8080/bye']) {
        const response = await register(server.issuer, { post_logout_redirect_uris: [uri] });
        expect(response.status, await response.clone().text()).to.equal(201);
        expect((await response.json() as RegisteredClient).post_logout_redirect_uris, uri).to.deep.equal([uri]);
      }
      // A private-use scheme is a native app's (RFC 8252), as for redirect_uris: said on its behalf when it did not.
      const native = await register(server.issuer, { application_type: undefined, post_logout_redirect_uris: ['com.example.app:/signed-out'] });
      expect(native.status, await native.clone().text()).to.equal(201);
      expect(await native.json()).to.deep.include({ application_type: 'native', post_logout_redirect_uris: ['com.example.app:/signed-out'] });
    });

    for (const [label, uri, description] of [
      ['a fragment', 'https://app.example.com/bye#top', /post_logout_redirect_uris must not contain a fragment/],
      ['http on a non-loopback host', 'http://app.example.com/bye', /post_logout_redirect_uris must use https/],
      ['a relative URI', '/bye', /post_logout_redirect_uris must be absolute/],
      ['a wildcard', 'https://*.example.com/bye', /post_logout_redirect_uris must not contain wildcards/],
      ['a javascript: URI', 'javascript:alert(1)', /post_logout_redirect_uris/],
    ] as const) {
      it(`refuses a post_logout_redirect_uri with ${label} with 400 invalid_client_metadata naming the field`, async () => {
        const response = await register(server.issuer, { post_logout_redirect_uris: [uri] });
        expect(response.status).to.equal(400);
        const body = await response.json() as { error: string; error_description: string };
        expect(body.error).to.equal('invalid_client_metadata');
        expect(body.error_description).to.match(description);
      });
    }
  });

  describe('signing out', () => {
    it('ends the browser session (the next authorization asks to sign in) and leaves issued tokens working', async () => {
      const agent = new UserAgent();
      const tokens = await signIn(agent);
      expect(await nextAuthorization(agent), 'signed in before').to.equal('signed in');

      const confirmed = await confirm(agent, 'sign out');
      expect(confirmed.status).to.equal(303);
      const success = confirmed.headers.get('location')!;
      expect(success).to.equal(`${server.issuer}/oauth/logout/success`);
      const page = await agent.request(success);
      expect(page.status).to.equal(200);
      expect(await page.text()).to.include('<h1>You are signed out</h1>');

      expect(await nextAuthorization(agent), 'signed out after').to.equal('login');
      // What the conformance suite's logout modules check next: prompt=none now needs a user interface.
      // For a self-registered client, with no one signed in to have granted it, the answer is held on a page.
      const silent = await agent.follow(codeRequest(server.issuer, app.client_id, { prompt: 'none' }).url, server.origin);
      expect(silent.response.status).to.equal(400);
      expect(await silent.response.text()).to.include('login_required');

      // Tokens belong to the grant, not to the session: the access token stays active, the refresh token works.
      expect(await introspect(server.issuer, postCredentials(app), tokens.access_token)).to.include({ active: true });
      const userinfo = await fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(userinfo.status).to.equal(200);
      const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(app) });
      expect(refreshed.status, await refreshed.clone().text()).to.equal(200);
    });

    it('"Stay signed in" keeps the session: the next authorization needs no sign-in', async () => {
      const agent = new UserAgent();
      await signIn(agent);
      const confirmed = await confirm(agent, 'stay');
      expect(confirmed.status).to.equal(303);
      const page = await agent.request(confirmed.headers.get('location')!);
      expect(await page.text()).to.include('<h1>You are still signed in</h1>');
      expect(await nextAuthorization(agent)).to.equal('signed in');
    });

    /** The question asked again after a confirmation the engine refused: a 303 to the logout endpoint, whose page says why. */
    async function expectAskedAgain(agent: UserAgent, refused: Response): Promise<string> {
      expect(refused.status, await refused.clone().text()).to.equal(303);
      expect(refused.headers.get('location')).to.equal(`${server.issuer}/oauth/logout?again=1`);
      const page = await agent.request(refused.headers.get('location')!);
      expect(page.status).to.equal(200);
      const html = await page.text();
      expect(html).to.include('Sign out of').and.include('was out of date').and.not.include('tell its developer');
      return html;
    }

    it('does not sign out on a confirmation with a wrong xsrf value, and asks the question again', async () => {
      const agent = new UserAgent(BROWSER);
      await signIn(agent);
      const page = await agent.request(logoutUrl());
      const { action } = logoutForm(await page.text());
      const forged = await agent.request(action, { form: { xsrf: 'not-the-value', logout: 'yes' } });
      await expectAskedAgain(agent, forged);
      expect(await nextAuthorization(agent)).to.equal('signed in');
    });

    it('does not sign out on a POST to confirm without the page\'s xsrf value (what a page on another site could send), and asks the question again', async () => {
      const agent = new UserAgent(BROWSER);
      await signIn(agent);
      const forged = await agent.request(`${server.issuer}/oauth/logout/confirm`, { form: { logout: 'yes' } });
      await expectAskedAgain(agent, forged);
      expect(await nextAuthorization(agent)).to.equal('signed in');
    });

    it('asks again, blaming no application, when the sign-out page answered was replaced by one opened later in another tab; the new answer signs out', async () => {
      const agent = new UserAgent(BROWSER);
      await signIn(agent);
      const first = logoutForm(await (await agent.request(logoutUrl())).text());
      await agent.request(logoutUrl());
      const stale = await agent.request(first.action, { form: { xsrf: first.xsrf, logout: 'yes' } });
      const again = logoutForm(await expectAskedAgain(agent, stale));
      expect(await nextAuthorization(agent), 'not signed out by the stale form').to.equal('signed in');

      const confirmed = await agent.request(again.action, { form: { xsrf: again.xsrf, logout: 'yes' } });
      expect(confirmed.headers.get('location')).to.equal(`${server.issuer}/oauth/logout/success`);
      expect(await nextAuthorization(agent)).to.equal('login');
    });

    it('says "you are signed out" to a sign-out page answered after another tab already signed out, not that the application failed', async () => {
      const agent = new UserAgent(BROWSER);
      await signIn(agent);
      const first = logoutForm(await (await agent.request(logoutUrl())).text());
      const second = logoutForm(await (await agent.request(logoutUrl())).text());
      expect((await agent.request(second.action, { form: { xsrf: second.xsrf, logout: 'yes' } })).status).to.equal(303);

      const late = await agent.request(first.action, { form: { xsrf: first.xsrf, logout: 'yes' } });
      expect(late.status).to.equal(200);
      const html = await late.text();
      expect(html).to.include('<h1>You are signed out</h1>').and.include('already signed out');
      expect(html).not.to.include('not signed out').and.not.include('tell its developer');
      expect(await nextAuthorization(agent)).to.equal('login');
    });

    it('refuses the question\'s form sent from another site, with its xsrf value, with 403 saying so: no one is signed out', async () => {
      const agent = new UserAgent(BROWSER);
      await signIn(agent);
      const { action, xsrf } = logoutForm(await (await agent.request(logoutUrl())).text());
      const fromElsewhere: Array<Record<string, string>> = [{ 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'https://evil.example' }];
      for (const foreign of fromElsewhere) {
        const forged = await agent.request(action, { form: { xsrf, logout: 'yes' }, headers: foreign });
        expect(forged.status, JSON.stringify(foreign)).to.equal(403);
        expect(await forged.text(), JSON.stringify(foreign)).to.include('<h1>Sent from another site</h1>').and.include('open the page again from this service');
      }
      expect(await nextAuthorization(agent), 'not signed out by the forms from elsewhere').to.equal('signed in');
      const confirmed = await agent.request(action, { form: { xsrf, logout: 'yes' }, headers: { 'sec-fetch-site': 'same-origin', origin: new URL(server.issuer).origin } });
      expect(confirmed.headers.get('location'), 'the same form from the page itself').to.equal(`${server.issuer}/oauth/logout/success`);
      expect(await nextAuthorization(agent)).to.equal('login');
    });

    it('takes a sign-out request posted from another site (a relying party\'s page), as before', async () => {
      const agent = new UserAgent(BROWSER);
      await signIn(agent);
      const posted = await agent.request(logoutUrl(), { form: { client_id: app.client_id }, headers: { 'sec-fetch-site': 'cross-site', origin: 'http://127.0.0.1:9' } });
      expect(posted.status).to.equal(303);
      const question = await agent.request(new URL(posted.headers.get('location')!, server.issuer).href);
      expect(await question.text()).to.include('asked to sign you out');
    });
  });

  describe('returning to the application', () => {
    it('with id_token_hint and a registered post_logout_redirect_uri, sends the browser there with state', async () => {
      const agent = new UserAgent();
      const { id_token } = await signIn(agent);
      expect(id_token).to.be.a('string');
      const page = await agent.request(logoutUrl({ id_token_hint: id_token!, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'st-123' }));
      const html = await page.text();
      expect(html).to.include('Logout App').and.include('asked to sign you out');
      // The page may send its form's redirect to the application's origin, and nowhere else beyond itself.
      expect(page.headers.get('content-security-policy')).to.match(/form-action 'self' http:\/\/127\.0\.0\.1:9;/);
      const { action, xsrf } = logoutForm(html);
      const confirmed = await agent.request(action, { form: { xsrf, logout: 'yes' } });
      expect(confirmed.status).to.equal(303);
      expect(confirmed.headers.get('location')).to.equal(`${SIGNED_OUT_URI}?state=st-123`);
      expect(await nextAuthorization(agent)).to.equal('login');
    });

    /** A browser without a session: the engine's self-submitting form to its confirm URL, submitted; the confirm's answer. */
    async function signOutWithoutSession(agent: UserAgent, params: Record<string, string>): Promise<Response> {
      const response = await agent.request(logoutUrl(params));
      // The engine's self-submitting form to its confirm URL, in the product's layout: its one script allowed by its hash alone.
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-security-policy')).to.match(/; script-src 'sha256-[A-Za-z0-9+/]+=*';/);
      const html = await response.text();
      expect(html).to.include('<html lang="en">').and.include('<h1>Signing you out</h1>');
      const action = /<form method="post" action="([^"]+)"/.exec(html)![1]!;
      const xsrf = /name="xsrf" value="([^"]+)"/.exec(html)![1]!;
      return agent.request(action, { form: { xsrf, logout: 'yes' } });
    }

    /** The signed-out page's plainly labelled link back, or null when it has none. */
    function linkBack(html: string): string | null {
      const match = /<a id="return-to-client" href="([^"]+)"[^>]*>Return to ([^<]+)<\/a>/.exec(html);
      return match ? `${match[1]!.replaceAll('&amp;', '&')} | ${match[2]}` : null;
    }

    it('without id_token_hint, never carries a browser to a self-registered client\'s post_logout_redirect_uri: the signed-out page links to it instead (section 3)', async () => {
      const agent = new UserAgent();
      const confirmed = await signOutWithoutSession(agent, { client_id: app.client_id, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'no-session' });
      expect(confirmed.status).to.equal(303);
      const location = confirmed.headers.get('location')!;
      expect(location, 'not sent to the application').to.equal(`${server.issuer}/oauth/logout/success`);
      const page = await agent.request(location);
      const html = await page.text();
      expect(html).to.include('<h1>You are signed out</h1>').and.include('not been checked by an administrator');
      expect(linkBack(html)).to.equal(`${SIGNED_OUT_URI}?state=no-session | Logout App at 127.0.0.1:9`);
      const again = await agent.request(location);
      expect(linkBack(await again.text()), 'the link is offered once').to.equal(null);
    });

    it('an empty id_token_hint vouches for nothing: the browser is not carried to a self-registered client\'s post_logout_redirect_uri', async () => {
      const agent = new UserAgent();
      const confirmed = await signOutWithoutSession(agent, { client_id: app.client_id, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'empty-hint', id_token_hint: '' });
      expect(confirmed.headers.get('location'), 'not sent to the application').to.equal(`${server.issuer}/oauth/logout/success`);
      const page = await agent.request(`${server.issuer}/oauth/logout/success`);
      expect(linkBack(await page.text())).to.equal(`${SIGNED_OUT_URI}?state=empty-hint | Logout App at 127.0.0.1:9`);
    });

    it('without id_token_hint, a signed-in user is asked, told a link will follow, and after signing out gets the link, not a redirect', async () => {
      const agent = new UserAgent();
      await signIn(agent);
      const page = await agent.request(logoutUrl({ client_id: app.client_id, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'asked' }));
      const html = await page.text();
      expect(html).to.include('offered a link back to <strong>Logout App</strong> at <strong>127.0.0.1:9</strong>');
      const { action, xsrf } = logoutForm(html);
      const confirmed = await agent.request(action, { form: { xsrf, logout: 'yes' } });
      expect(confirmed.headers.get('location')).to.equal(`${server.issuer}/oauth/logout/success`);
      expect(linkBack(await (await agent.request(confirmed.headers.get('location')!)).text())).to.equal(`${SIGNED_OUT_URI}?state=asked | Logout App at 127.0.0.1:9`);
      expect(await nextAuthorization(agent)).to.equal('login');
    });

    it('offers the way back held for one sign-out only: a request the user left unanswered plants no link on a later sign-out, for another application or for none', async () => {
      const other = await registerClient(server.issuer, { client_name: 'Other Logout App', post_logout_redirect_uris: ['http://127.0.0.1:9/other'] });
      const laterRequests: Array<Record<string, string>> = [{ client_id: other.client_id }, {}];
      for (const later of laterRequests) {
        const agent = new UserAgent();
        await signIn(agent);
        const planted = await agent.request(logoutUrl({ client_id: app.client_id, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'planted' }));
        expect(await planted.text()).to.include('offered a link back to <strong>Logout App</strong>');
        const confirmed = await confirm(agent, 'sign out', later);
        expect(confirmed.headers.get('location')).to.equal(`${server.issuer}/oauth/logout/success`);
        const html = await (await agent.request(confirmed.headers.get('location')!)).text();
        expect(html, JSON.stringify(later)).to.include('<h1>You are signed out</h1>');
        expect(linkBack(html), JSON.stringify(later)).to.equal(null);
      }
    });

    it('plants no link through a logout request the engine refuses: the sign-out page left open ends with none', async () => {
      const agent = new UserAgent();
      await signIn(agent);
      const open = await agent.request(logoutUrl());
      const { action, xsrf } = logoutForm(await open.text());
      // A parameter given twice: the engine refuses the request before it makes a form of its own.
      const refused = await agent.request(`${logoutUrl({ client_id: app.client_id, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'planted' })}&ui_locales=en&ui_locales=fr`);
      expect(refused.status).to.equal(400);
      const confirmed = await agent.request(action, { form: { xsrf, logout: 'yes' } });
      expect(confirmed.headers.get('location')).to.equal(`${server.issuer}/oauth/logout/success`);
      const html = await (await agent.request(confirmed.headers.get('location')!)).text();
      expect(html).to.include('<h1>You are signed out</h1>');
      expect(linkBack(html)).to.equal(null);
    });

    it('shows the way back only once the sign-out it was held for is confirmed, not on the signed-out page reached without answering', async () => {
      const agent = new UserAgent();
      await signIn(agent);
      await agent.request(logoutUrl({ client_id: app.client_id, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'unanswered' }));
      const page = await agent.request(`${server.issuer}/oauth/logout/success`);
      const html = await page.text();
      expect(html).to.include('<h1>You are still signed in</h1>');
      expect(linkBack(html)).to.equal(null);
    });

    it('with client_id alone, still sends the browser to the post_logout_redirect_uri of a client an operator vetted', async () => {
      const vetted = await registerVettedClient(server, { client_name: 'Vetted Logout App', post_logout_redirect_uris: [SIGNED_OUT_URI] });
      const confirmed = await signOutWithoutSession(new UserAgent(), { client_id: vetted.client_id, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'vetted' });
      expect(confirmed.headers.get('location')).to.equal(`${SIGNED_OUT_URI}?state=vetted`);
    });

    it('refuses an unregistered post_logout_redirect_uri with an error page, never a redirect', async () => {
      const agent = new UserAgent();
      await signIn(agent);
      const response = await agent.request(logoutUrl({ client_id: app.client_id, post_logout_redirect_uri: 'http://127.0.0.1:9/elsewhere', state: 'x' }));
      expect(response.status).to.equal(400);
      expect(response.headers.get('location')).to.equal(null);
      const html = await response.text();
      expect(html).to.include('post_logout_redirect_uri not registered');
      expect(html).not.to.include('op.logoutForm');
      expect(await nextAuthorization(agent), 'still signed in').to.equal('signed in');
    });

    it('ignores a post_logout_redirect_uri that names no client (no client_id, no id_token_hint): the server\'s own page instead', async () => {
      const agent = new UserAgent();
      await signIn(agent);
      const confirmed = await confirm(agent, 'sign out', { post_logout_redirect_uri: SIGNED_OUT_URI, state: 'x' });
      expect(confirmed.headers.get('location')).to.equal(`${server.issuer}/oauth/logout/success`);
    });

    it('refuses an id_token_hint the server did not sign (400 error page)', async () => {
      const agent = new UserAgent();
      const { id_token } = await signIn(agent);
      const [header, payload] = id_token!.split('.');
      const response = await agent.request(logoutUrl({ id_token_hint: `${header}.${payload}.AAAA`, post_logout_redirect_uri: SIGNED_OUT_URI }));
      expect(response.status).to.equal(400);
      expect(response.headers.get('location')).to.equal(null);
    });

    it('refuses an id_token_hint issued to no client of this server with the sign-out refusal, not as an unknown application, and signs no one out', async () => {
      const agent = new UserAgent({ accept: 'text/html' });
      await signIn(agent);
      const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
      const foreign = `${encode({ alg: 'RS256' })}.${encode({ iss: 'someone-else', sub: 'x', aud: 'cl_no_such_client', iat: 1, exp: 4102444800 })}.AAAA`;
      const response = await agent.request(logoutUrl({ id_token_hint: foreign, post_logout_redirect_uri: SIGNED_OUT_URI }));
      const html = await response.text();
      expect(response.status).to.equal(400);
      expect(html).to.include('asked to sign you out in a way this server cannot accept').and.not.include('Unknown application');
      expect(await nextAuthorization(agent), 'still signed in').to.equal('signed in');
    });

    it('accepts the logout request by POST (section 2: GET and POST) with a 303 to a GET that names the form by a handle, never the id_token_hint', async () => {
      const agent = new UserAgent(BROWSER);
      const tokens = await signIn(agent);
      const form = { id_token_hint: tokens.id_token!, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'by-post' };
      const response = await agent.request(logoutUrl(), { method: 'POST', form });
      expect(response.status).to.equal(303);
      const location = new URL(response.headers.get('location')!);
      expect(`${location.origin}${location.pathname}`).to.equal(`${server.issuer}/oauth/logout`);
      expect([...location.searchParams.keys()]).to.deep.equal(['posted_form']);

      const page = await agent.request(location.href);
      expect(page.status).to.equal(200);
      const html = await page.text();
      expect(html, 'the engine read the id_token_hint').to.include('Logout App').and.include('asked to sign you out');
      const { action, xsrf } = logoutForm(html);
      const signedOut = await agent.request(new URL(action, server.origin).href, { form: { xsrf, logout: 'yes' } });
      const back = new URL(signedOut.headers.get('location')!);
      expect(`${back.origin}${back.pathname}`).to.equal(SIGNED_OUT_URI);
      expect(back.searchParams.get('state')).to.equal('by-post');
      expect((await agent.request(location.href)).status, 'the handle is used up').to.equal(400);

      const json = await fetch(`${server.issuer}/oauth/logout`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(json.status).to.equal(400);
      expect(await json.text()).to.include('logout request sent with POST must be a form');
    });
  });

  it('keeps what a browser without a session leaves behind (the confirm form\'s xsrf) only as long as an interaction, not two weeks', async () => {
    const before = Math.floor(Date.now() / 1000);
    const response = await fetch(`${server.issuer}/oauth/logout`);
    expect(response.status).to.equal(200);
    const db = new DatabaseSync(server.store.slice('sqlite:'.length), { readOnly: true });
    try {
      const rows = db.prepare("SELECT expires_at FROM oidc_models WHERE model = 'Session' AND expires_at >= ? AND payload NOT LIKE '%accountId%'").all(before + 60) as Array<{ expires_at: number }>;
      expect(rows, 'the anonymous session').to.have.length.at.least(1);
      for (const { expires_at: expiresAt } of rows) expect(expiresAt - before).to.be.at.most(10 * 60 + 2);
    } finally {
      db.close();
    }
  });
});
