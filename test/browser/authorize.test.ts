import { expect } from 'chai';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import type { Page, Response as PageResponse } from 'playwright-core';

import { browserForSuite, type CapturedRequest, captureRedirect, focusedElement, recordRequests, type RedirectCapture, signIn } from '../support/browser.ts';
import { checkPage } from '../support/page_audit.ts';
import { REDIRECT_URI, codeRequest, registerClient, type CodeRequest, type RegisteredClient } from '../support/oauth.ts';
import { registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';

/**
 * The authorization endpoint's pages, in a real browser (Debian Chromium through playwright-core)
 * against the real server process. The client's redirect URI is answered inside the browser, so
 * what the server sends the user to is captured without any network traffic.
 */
describe('authorization in a real browser', function () {
  this.timeout(30_000);

  let server: TestServer;
  let as: oauth.AuthorizationServer;
  const { open } = browserForSuite();
  let clientCount = 0;

  before(async function () {
    server = await startServer();
    const issuer = new URL(server.issuer);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true }));
  });

  after(async function () {
    await server?.stop();
  });

  /** A client that registered itself (open registration), or, when `vetted`, one an operator let in with an initial access token. */
  async function newClient(metadata: Record<string, unknown> = {}, { vetted = false } = {}): Promise<RegisteredClient> {
    clientCount += 1;
    const named = { client_name: `Browser Test App ${clientCount}`, ...metadata };
    return vetted ? registerVettedClient(server, named) : registerClient(server.issuer, named);
  }

  /** An authorization request for the client with PKCE S256 and a fresh state; `undefined` values leave a parameter out. */
  const authorization = (client: RegisteredClient, overrides: Record<string, string | undefined> = {}): CodeRequest =>
    codeRequest(server.issuer, client.client_id, overrides);

  /** A new client, a page whose redirects to REDIRECT_URI are captured, and an authorization request for that client. */
  async function prepare(overrides: Record<string, string | undefined> = {}, options: { vetted?: boolean } = {}): Promise<{ client: RegisteredClient; page: Page; capture: RedirectCapture; auth: CodeRequest }> {
    const client = await newClient({}, options);
    const page = await open();
    const capture = await captureRedirect(page, REDIRECT_URI);
    return { client, page, capture, auth: authorization(client, overrides) };
  }

  const consentHeading = (page: Page) => page.getByRole('heading', { level: 1, name: /^Authorize\b/ });

  /** Exchanges the code the browser brought back, as a client would: oauth4webapi, client_secret_post. */
  async function exchange(client: RegisteredClient, callback: URL | URLSearchParams, auth: CodeRequest): Promise<oauth.TokenEndpointResponse> {
    const oauthClient: oauth.Client = { client_id: client.client_id };
    const params = oauth.validateAuthResponse(as, oauthClient, callback, auth.state);
    const response = await oauth.authorizationCodeGrantRequest(as, oauthClient, oauth.ClientSecretPost(client.client_secret!), params, REDIRECT_URI, auth.verifier, { [oauth.allowInsecureRequests]: true });
    expect(response.status, 'token endpoint status').to.equal(200);
    return oauth.processAuthorizationCodeResponse(as, oauthClient, response);
  }

  /** Runs login + consent (Allow) in the page and returns the captured redirect to the client. */
  async function fullFlow(page: Page, user: SeededUser, auth: CodeRequest, capture: { next(): Promise<CapturedRequest> }): Promise<CapturedRequest> {
    await page.goto(auth.url);
    await signIn(page, user);
    await consentHeading(page).waitFor();
    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    return capture.next();
  }

  /** An error redirect to the client: the error, the request's state and iss, and no code. */
  function expectErrorRedirect(redirect: CapturedRequest, auth: CodeRequest, error: string): void {
    expect(redirect.url.searchParams.get('error')).to.equal(error);
    expect(redirect.url.searchParams.get('state')).to.equal(auth.state);
    expect(redirect.url.searchParams.get('iss')).to.equal(server.issuer);
    expect(redirect.url.searchParams.has('code')).to.equal(false);
  }

  /** What the focused element is: its id, or a button's value, or its tag. */
  const focused = async (page: Page) => {
    const element = await focusedElement(page);
    return element ? element.id || element.value || element.tag : '';
  };

  async function tabUntil(page: Page, target: string, maxTabs: number): Promise<void> {
    for (let i = 0; i < maxTabs && await focused(page) !== target; i += 1) await page.keyboard.press('Tab');
    expect(await focused(page), `focus after tabbing towards ${target}`).to.equal(target);
  }

  const onServer = (url: string) => url.startsWith(`${server.origin}/`);

  it('logs in, shows the consent page and redirects back with code, state and iss; the code buys a workspace token', async function () {
    const user = await seedUser(server, [{ workspace: 'Happy Path Co' }]);
    const { client, page, capture, auth } = await prepare();

    const login = await page.goto(auth.url);
    expect(login!.status()).to.equal(200);
    expect(new URL(page.url()).origin).to.equal(server.origin);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.locator('main').innerText()).to.include(client.client_name!);
    // A text field with the email keyboard: a browser's type=email refuses a non-ASCII part before "@".
    expect(await page.getByLabel('Email').getAttribute('inputmode')).to.equal('email');
    expect(await page.getByLabel('Password').getAttribute('type')).to.equal('password');

    await signIn(page, user);
    await consentHeading(page).waitFor();
    const consent = await page.locator('main').innerText();
    expect(consent).to.include(client.client_name!);
    expect(consent, 'where the user will be sent').to.include('127.0.0.1:9');
    const scopeItems = (await page.getByRole('listitem').allInnerTexts()).map((text) => text.trim());
    expect(scopeItems).to.have.length(2);
    for (const item of scopeItems) {
      expect(['api', 'profile', 'openid'], 'a scope described only by its raw value').not.to.include(item);
      expect(item.split(/\s+/).length, `"${item}" in plain words`).to.be.greaterThan(2);
    }
    expect(scopeItems.some((item) => /name|email/i.test(item)), `profile described: ${scopeItems.join(' | ')}`).to.equal(true);
    expect(await page.getByRole('button', { name: 'Allow', exact: true }).isVisible()).to.equal(true);
    expect(await page.getByRole('button', { name: 'Deny', exact: true }).isVisible()).to.equal(true);

    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    const redirect = await capture.next();
    expect(redirect.method).to.equal('GET');
    expect(`${redirect.url.origin}${redirect.url.pathname}`).to.equal(REDIRECT_URI);
    expect(redirect.url.searchParams.get('code')).to.be.a('string').and.not.equal('');
    expect(redirect.url.searchParams.get('state')).to.equal(auth.state);
    expect(redirect.url.searchParams.get('iss')).to.equal(server.issuer);
    expect(redirect.url.searchParams.has('error')).to.equal(false);

    const tokens = await exchange(client, redirect.url, auth);
    expect(tokens.token_type.toLowerCase()).to.equal('bearer');
    expect(tokens.access_token).to.be.a('string');
    const claims = decodeJwt(tokens.access_token);
    expect(claims.workspace_id).to.equal(user.workspaces[0]!.id);
    expect(claims.sub).to.equal(user.id);
    expect(claims.scope).to.equal('api profile');
  });

  it('can be completed with the keyboard alone', async function () {
    const user = await seedUser(server, [{ workspace: 'Keyboard Ltd' }]);
    const { page, capture, auth } = await prepare();

    await page.goto(auth.url);
    await tabUntil(page, 'email', 3);
    await page.keyboard.type(user.email);
    await page.keyboard.press('Tab');
    expect(await focused(page)).to.equal('password');
    await page.keyboard.type(user.password);
    await page.keyboard.press('Enter');

    await consentHeading(page).waitFor();
    await tabUntil(page, 'allow', 10);
    await page.keyboard.press('Enter');

    const redirect = await capture.next();
    expect(redirect.url.searchParams.get('code')).to.be.a('string').and.not.equal('');
    expect(redirect.url.searchParams.get('state')).to.equal(auth.state);
  });

  it('signs in a user whose email is not ASCII, typed as they write it, before and after the "@"', async function () {
    const user = await seedUser(server, [{ workspace: 'Unicode Mail' }], { email: `zo\u00eb-${Date.now()}@ex\u00e4mple.com` });
    const { page, auth } = await prepare();
    await page.goto(auth.url);
    await signIn(page, user);
    // A field that refused the address would keep the sign-in page: the consent page would never come.
    await consentHeading(page).waitFor({ timeout: 5_000 });
  });

  it('fills in the email address the client names with login_hint, which the user may still change', async function () {
    const user = await seedUser(server, [{ workspace: 'Hinted Co' }]);
    const { page, capture, auth } = await prepare({ login_hint: user.email });
    await page.goto(auth.url);
    expect(await page.getByLabel('Email').inputValue()).to.equal(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    expect((await capture.next()).url.searchParams.has('code')).to.equal(true);
  });

  it('shows an error on the login page for a wrong password and sends nothing to the client', async function () {
    const user = await seedUser(server, [{ workspace: 'Typo Inc' }]);
    const { page, capture, auth } = await prepare();

    await page.goto(auth.url);
    const loginUrl = page.url();
    await signIn(page, user, 'not-the-password');

    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).to.match(/password/i);
    expect(onServer(page.url()), page.url()).to.equal(true);
    expect(new URL(page.url()).pathname.startsWith(new URL(loginUrl).pathname)).to.equal(true);
    expect(await page.getByLabel('Password').isVisible()).to.equal(true);
    expect(await page.getByLabel('Email').inputValue(), 'the email is kept').to.equal(user.email);
    expect(await consentHeading(page).count()).to.equal(0);
    expect(capture.hits).to.have.length(0);
  });

  it('redirects a vetted client with access_denied, state and iss when the user denies', async function () {
    const user = await seedUser(server, [{ workspace: 'Denial Corp' }]);
    const { page, capture, auth } = await prepare({}, { vetted: true });

    await page.goto(auth.url);
    await signIn(page, user);
    await consentHeading(page).waitFor();
    await page.getByRole('button', { name: 'Deny', exact: true }).click();

    const redirect = await capture.next();
    expectErrorRedirect(redirect, auth, 'access_denied');
  });

  it('tells a vetted client access_denied, state and iss when the user who signs in belongs to no workspace', async function () {
    const user = await seedUser(server, []);
    const { page, capture, auth } = await prepare({}, { vetted: true });

    await page.goto(auth.url);
    await signIn(page, user);
    const redirect = await capture.next();
    expectErrorRedirect(redirect, auth, 'access_denied');
    expect(redirect.url.searchParams.get('error_description')).to.match(/not a member of any workspace/);
  });

  it('lets a user in two workspaces pick one; the token carries that workspace and the role there', async function () {
    const user = await seedUser(server, [{ workspace: 'Northwind Admins' }, { workspace: 'Southwind Viewers', role: 'viewer' }]);
    const { client, page, capture, auth } = await prepare();

    await page.goto(auth.url);
    await signIn(page, user);
    await consentHeading(page).waitFor();
    const group = page.getByRole('group', { name: 'Workspace' });
    const radios = group.getByRole('radio');
    expect(await radios.count()).to.equal(2);
    const second = group.getByRole('radio', { name: /Southwind Viewers/ });
    expect(await group.getByRole('radio', { name: /Northwind Admins/ }).isVisible()).to.equal(true);
    await second.check();
    expect(await second.isChecked()).to.equal(true);
    await page.getByRole('button', { name: 'Allow', exact: true }).click();

    const redirect = await capture.next();
    const claims = decodeJwt((await exchange(client, redirect.url, auth)).access_token);
    expect(claims.workspace_id).to.equal(user.workspaces[1]!.id);
    expect(claims.role).to.equal('viewer');
  });

  it('tells a user who pressed Back from the consent page that Forward returns there, and Forward does: the request goes on', async function () {
    const user = await seedUser(server, [{ workspace: 'Back Button Co' }]);
    const { client, page, capture, auth } = await prepare();
    await page.goto(auth.url);
    await signIn(page, user);
    await consentHeading(page).waitFor();
    await page.goBack();
    await page.getByRole('heading', { level: 1, name: 'This page has expired' }).waitFor();
    expect(await page.locator('main').innerText()).to.match(/Back button, its Forward button returns you to where you were/);
    await page.goForward();
    await consentHeading(page).waitFor();
    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    const redirect = await capture.next();
    expect(redirect.url.searchParams.get('state')).to.equal(auth.state);
    expect(decodeJwt((await exchange(client, redirect.url, auth)).access_token).sub).to.equal(user.id);
  });

  it('lets the user go on with another account from the consent page, in the same request: the token is the other account\'s', async function () {
    const first = await seedUser(server, [{ workspace: 'First Account Co' }]);
    const other = await seedUser(server, [{ workspace: 'Other Account Co' }]);
    const { client, page, capture, auth } = await prepare();
    await page.goto(auth.url);
    await signIn(page, first);
    await consentHeading(page).waitFor();
    expect(await page.locator('.signed-in-as').innerText()).to.include(first.email);

    await page.getByRole('button', { name: 'Sign in with another account' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.getByLabel('Email').inputValue(), 'nothing filled in for the other account').to.equal('');
    await signIn(page, other);
    await consentHeading(page).waitFor();
    expect(await page.locator('.signed-in-as').innerText()).to.include(other.email);
    expect(await page.locator('main').innerText()).to.include('Other Account Co');
    await page.getByRole('button', { name: 'Allow', exact: true }).click();

    const redirect = await capture.next();
    expect(redirect.url.searchParams.get('state'), 'the same request').to.equal(auth.state);
    const claims = decodeJwt((await exchange(client, redirect.url, auth)).access_token);
    expect([claims.sub, claims.workspace_id]).to.deep.equal([other.id, other.workspaces[0]!.id]);
  });

  it('remembers the session and the consent; prompt=consent asks again without a login', async function () {
    const user = await seedUser(server, [{ workspace: 'Returning Users' }]);
    const { client, page, capture, auth } = await prepare();
    const first = await fullFlow(page, user, auth, capture);
    expect(first.url.searchParams.get('code')).to.be.a('string');

    const pagesShown: string[] = [];
    page.on('response', (response: PageResponse) => {
      if (response.request().resourceType() === 'document' && onServer(response.url())) pagesShown.push(new URL(response.url()).pathname);
    });

    const second = authorization(client);
    await page.goto(second.url);
    const redirect = await capture.next();
    expect(redirect.url.searchParams.get('state')).to.equal(second.state);
    expect(redirect.url.searchParams.get('code')).to.be.a('string').and.not.equal('');
    expect(pagesShown.filter((path) => path.includes('/interaction/')), 'no login or consent page shown').to.deep.equal([]);
    expect(decodeJwt((await exchange(client, redirect.url, second)).access_token).workspace_id).to.equal(user.workspaces[0]!.id);

    const third = authorization(client, { prompt: 'consent' });
    await page.goto(third.url);
    await consentHeading(page).waitFor();
    expect(await page.getByLabel('Password').count(), 'no login form').to.equal(0);
    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    const again = await capture.next();
    expect(again.url.searchParams.get('state')).to.equal(third.state);
    expect(again.url.searchParams.get('code')).to.be.a('string').and.not.equal('');
  });

  it('says on the sign-in page who is signed in and that the application asks them to sign in again (prompt=login, a max_age the sign-in is older than)', async function () {
    const user = await seedUser(server, [{ workspace: 'Asked Again Co' }]);
    // OpenID Connect requests: the engine takes max_age only with the openid scope.
    const scope = 'openid api';
    const { client, page, capture, auth } = await prepare({ scope });
    await page.goto(auth.url);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.locator('main').innerText(), 'no one signed in yet: the plain form').to.not.match(/sign in again|Signed in as/);
    await fullFlow(page, user, auth, capture);
    // max_age is in seconds: the sign-in is older than 1 once a second has passed.
    await new Promise((resolve) => setTimeout(resolve, 2_000));

    // max_age first: signing in again for prompt=login makes the sign-in a new one.
    const asked = [
      { overrides: { scope, max_age: '1' }, why: `${client.client_name} asks you to sign in again: it accepts only a sign-in from the last 1 second, and you signed in before that.` },
      { overrides: { scope, prompt: 'login' }, why: `${client.client_name} asks you to sign in again, although you are already signed in.` },
    ];
    for (const { overrides, why } of asked) {
      const again = authorization(client, overrides);
      await page.goto(again.url);
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      const main = await page.locator('main').innerText();
      expect(main, JSON.stringify(overrides)).to.include(why).and.include(`Signed in as ${user.email}`);
      const signOut = await page.getByRole('link', { name: 'Sign out' }).getAttribute('href');
      expect(new URL(signOut!, page.url()).pathname).to.equal(new URL(`${server.issuer}/oauth/logout`).pathname);
      expect(await page.getByLabel('Email').inputValue(), 'the signed-in user\'s email, to sign in again with').to.equal(user.email);
      expect(await focused(page), 'the password is what to type').to.equal('password');
      await checkPage(page, `login-again-${Object.keys(overrides)[1]}`);

      await page.getByLabel('Password').fill(user.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const redirect = await capture.next();
      expect(redirect.url.searchParams.get('state')).to.equal(again.state);
      expect(redirect.url.searchParams.get('code')).to.be.a('string');
    }
  });

  it('says on the sign-in page that the application asks for another account than the one signed in (a claims sub of someone else), rather than showing the plain form again after each sign-in', async function () {
    const [signedIn, asked] = [await seedUser(server, [{ workspace: 'Signed In Co' }]), await seedUser(server, [{ workspace: 'Asked For Co' }])];
    const scope = 'openid api';
    const { client, page, capture, auth } = await prepare({ scope });
    await fullFlow(page, signedIn, auth, capture);
    const redirected = capture.hits.length;

    const another = authorization(client, { scope, claims: JSON.stringify({ id_token: { sub: { value: asked.id } } }) });
    const why = `${client.client_name} asks for another account than the one signed in here (${signedIn.email}): sign in with the account it asks for.`;
    await page.goto(another.url);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.locator('main').innerText()).to.include(why).and.include(`Signed in as ${signedIn.email}`);
    expect(await page.getByLabel('Email').inputValue(), 'not the account it does not want').to.equal('');
    await checkPage(page, 'login-another-account');

    // Signing in again as the account signed in gets the same page, saying the same.
    await signIn(page, signedIn);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.locator('main').innerText()).to.include(why);
    expect(capture.hits, 'nothing more reached the client').to.have.length(redirected);
  });

  it('answers prompt=select_account with the sign-in page, and goes on as the account signed in with (OpenID Connect Core 3.1.2.1)', async function () {
    const [first, second] = [await seedUser(server, [{ workspace: 'First Account Co' }]), await seedUser(server, [{ workspace: 'Second Account Co' }])];
    const { client, page, capture, auth } = await prepare();
    await fullFlow(page, first, auth, capture);

    // fullFlow signs in on the page it is shown: a sign-in page despite the session, whoever signed in before.
    for (const user of [second, first]) {
      const chosen = authorization(client, { prompt: 'select_account' });
      const redirect = await fullFlow(page, user, chosen, capture);
      expect(redirect.url.searchParams.get('state')).to.equal(chosen.state);
      expect(decodeJwt((await exchange(client, redirect.url, chosen)).access_token).workspace_id, user.email).to.equal(user.workspaces[0]!.id);
    }
  });

  describe('errors for a client nobody vetted (RFC 9700 section 4.11.2)', function () {
    /** The page shown instead of the redirect: on the server, 400, nothing sent, and a labelled way back carrying the error. */
    async function expectHeldError(page: Page, response: PageResponse | null, capture: RedirectCapture, auth: CodeRequest, error: string): Promise<void> {
      expect(response!.status()).to.equal(400);
      expect(onServer(page.url()), page.url()).to.equal(true);
      expect(capture.hits, 'nothing reached the client by itself').to.have.length(0);
      const text = await page.locator('main').innerText();
      expect(text).to.include(error);
      expect(text).to.match(/not been checked by an administrator/);
      expect(text, 'the reference the log has it under').to.include(`Reference: ${response!.headers()['x-request-id']}`);
      const link = page.getByRole('link', { name: /^Return to Browser Test App \d+ at 127\.0\.0\.1:9$/ });
      const back = new URL((await link.getAttribute('href'))!);
      expect(`${back.origin}${back.pathname}`).to.equal(REDIRECT_URI);
      expect(back.searchParams.get('error')).to.equal(error);
      expect(back.searchParams.get('state')).to.equal(auth.state);
      expect(back.searchParams.get('iss')).to.equal(server.issuer);
    }

    it('shows an anonymous browser the error on the server, with a link back the user may follow', async function () {
      const { page, capture, auth } = await prepare({ scope: 'api admin' });
      const response = await page.goto(auth.url);
      await expectHeldError(page, response, capture, auth, 'invalid_scope');

      await page.getByRole('link', { name: /^Return to/ }).click();
      expectErrorRedirect(await capture.next(), auth, 'invalid_scope');
    });

    it('shows no text the request sent (a scope, a resource: whoever made the link chose them) as the server\'s reason, but the code and a reason of its own; the link back still carries the whole description', async function () {
      const phishing = 'Your account is locked. Call +1-800-555-0100 to unlock it';
      const asked = [
        { overrides: { scope: `api ${phishing}` }, error: 'invalid_scope', reason: 'The server’s reason: the request asks for a scope this server does not offer (it offers openid, api, profile) (invalid_scope)' },
        { overrides: { resource: `https://records.example/ ${phishing}` }, error: 'invalid_target', reason: 'The server’s reason: the request names an API (resource) this server issues no tokens for (invalid_target)' },
        // One long word, which the refusal names back cut short.
        { overrides: { scope: `Call-+1-800-555-0100-${'-'.repeat(300)}` }, error: 'invalid_scope', reason: 'does not offer' },
      ];
      for (const { overrides, error, reason } of asked) {
        const { page, capture, auth } = await prepare(overrides);
        const response = await page.goto(auth.url);
        await expectHeldError(page, response, capture, auth, error);
        const text = await page.locator('main').innerText();
        expect(text, `${error}: the request's words`).to.not.include('+1-800-555-0100');
        expect(text, error).to.include(reason);
        const back = new URL((await page.getByRole('link', { name: /^Return to/ }).getAttribute('href'))!);
        expect(back.searchParams.get('error_description'), 'the application is told what it sent').to.include('+1-800-555-0100');
      }

      // A reason that repeats nothing of the request is the server's own, shown as it is.
      const { page, auth } = await prepare({ code_challenge: undefined, code_challenge_method: undefined });
      await page.goto(auth.url);
      expect(await page.locator('main').innerText()).to.match(/The server’s reason: .*PKCE.* \(invalid_request\)/);
    });

    it('holds a missing PKCE challenge the same way', async function () {
      const { page, capture, auth } = await prepare({ code_challenge: undefined, code_challenge_method: undefined });
      await expectHeldError(page, await page.goto(auth.url), capture, auth, 'invalid_request');
    });

    it('does not send a user who denied straight to the application', async function () {
      const user = await seedUser(server, [{ workspace: 'Careful Corp' }]);
      const { page, capture, auth } = await prepare();
      await page.goto(auth.url);
      await signIn(page, user);
      await consentHeading(page).waitFor();
      const [response] = await Promise.all([
        page.waitForResponse((candidate) => onServer(candidate.url()) && candidate.request().isNavigationRequest() && candidate.status() === 400),
        page.getByRole('button', { name: 'Deny', exact: true }).click(),
      ]);
      await page.waitForLoadState();
      expect(await page.getByRole('heading', { level: 1 }).innerText()).to.match(/^You did not allow Browser Test App/);
      await expectHeldError(page, response, capture, auth, 'access_denied');
    });

    it('holds the access_denied for a user in no workspace the same way, saying why, and lets them sign out to use another account', async function () {
      const user = await seedUser(server, []);
      const { page, capture, auth } = await prepare();
      await page.goto(auth.url);
      const [response] = await Promise.all([
        page.waitForResponse((candidate) => onServer(candidate.url()) && candidate.request().isNavigationRequest() && candidate.status() === 400),
        signIn(page, user),
      ]);
      await page.waitForLoadState();
      expect(await page.getByRole('heading', { level: 1 }).innerText()).to.match(/^Browser Test App \d+ was not given access$/);
      expect(await page.locator('main').innerText()).to.include('not a member of any workspace');
      await expectHeldError(page, response, capture, auth, 'access_denied');
      await checkPage(page, 'held-no-workspace');

      await page.getByRole('link', { name: 'Sign out' }).click();
      await page.getByRole('heading', { level: 1, name: /^Sign out of / }).waitFor();
      await page.getByRole('button', { name: 'Sign out', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'You are signed out' }).waitFor();
      expect(capture.hits, 'nothing reached the client by itself').to.have.length(0);
    });

    it('holds a form_post answer too: the page posts the error only when the user presses the button', async function () {
      const { page, capture, auth } = await prepare({ scope: 'api admin', response_mode: 'form_post' });
      const response = await page.goto(auth.url);
      expect(response!.status()).to.equal(400);
      expect(capture.hits, 'nothing reached the client by itself').to.have.length(0);
      await page.getByRole('button', { name: /^Return to Browser Test App \d+ at 127\.0\.0\.1:9$/ }).click();
      const posted = await capture.next();
      expect(posted.method).to.equal('POST');
      const fields = new URLSearchParams(posted.body ?? '');
      expect(fields.get('error')).to.equal('invalid_scope');
      expect(fields.get('state')).to.equal(auth.state);
      expect(fields.get('iss')).to.equal(server.issuer);
    });

    it('holds a prompt=none answer too when no one signed in here has granted the client (no silent bounce to its site)', async function () {
      const { page, capture, auth } = await prepare({ prompt: 'none' });
      await expectHeldError(page, await page.goto(auth.url), capture, auth, 'login_required');
    });

    it('answers prompt=none straight away for the signed-in user who granted the client: silent renewal, its code and its errors', async function () {
      const user = await seedUser(server, [{ workspace: 'Silent Renewal' }]);
      const { client, page, capture, auth } = await prepare();
      expect((await fullFlow(page, user, auth, capture)).url.searchParams.get('code')).to.be.a('string');

      const renewal = authorization(client, { prompt: 'none' });
      await page.goto(renewal.url);
      const renewed = await capture.next();
      expect(renewed.url.searchParams.get('code'), 'a code without any page').to.be.a('string');
      expect(renewed.url.searchParams.get('state')).to.equal(renewal.state);

      const wider = authorization(client, { prompt: 'none', scope: 'api admin' });
      await page.goto(wider.url);
      expectErrorRedirect(await capture.next(), wider, 'invalid_scope');
    });

    it('still completes a good request without any extra page', async function () {
      const user = await seedUser(server, [{ workspace: 'Unvetted Success' }]);
      const { page, capture, auth } = await prepare();
      const redirect = await fullFlow(page, user, auth, capture);
      expect(redirect.url.searchParams.get('code')).to.be.a('string');
    });
  });

  describe('requests that must not redirect', function () {
    /** A 400 HTML error page shown on the server, naming `mention`, with nothing sent to the client. */
    async function expectErrorPage(page: Page, response: PageResponse | null, capture: RedirectCapture, mention: string): Promise<void> {
      expect(response!.status()).to.equal(400);
      expect(response!.headers()['content-type']).to.match(/^text\/html/);
      expect(onServer(page.url()), page.url()).to.equal(true);
      expect(capture.hits).to.have.length(0);
      expect(await page.getByRole('heading', { level: 1 }).innerText()).to.not.equal('');
      expect(await page.locator('main').innerText()).to.include(mention);
    }

    it('shows an error page on the server for an unknown client_id', async function () {
      const page = await open();
      const capture = await captureRedirect(page, 'http://127.0.0.1:9/');
      const response = await page.goto(codeRequest(server.issuer, 'no-such-client', { scope: 'api', state: 'xyz' }).url);

      await expectErrorPage(page, response, capture, 'invalid_client');
    });

    it('shows an error page on the server for a redirect_uri the client did not register', async function () {
      const client = await newClient();
      const page = await open();
      const capture = await captureRedirect(page, 'http://127.0.0.1:9/');
      const response = await page.goto(authorization(client, { redirect_uri: 'http://127.0.0.1:9/elsewhere' }).url);

      await expectErrorPage(page, response, capture, 'redirect_uri');
    });
  });

  describe('PKCE', function () {
    for (const [name, overrides] of [
      ['without code_challenge', { code_challenge: undefined, code_challenge_method: undefined }],
      ['with code_challenge_method=plain', { code_challenge: 'a'.repeat(43), code_challenge_method: 'plain' }],
    ] as const) {
      it(`refuses a request ${name} with invalid_request and no code`, async function () {
        const { page, capture, auth } = await prepare(overrides, { vetted: true });
        await page.goto(auth.url);

        const redirect = await capture.next();
        expectErrorRedirect(redirect, auth, 'invalid_request');
        expect(redirect.url.searchParams.get('error_description')).to.match(/pkce|code_challenge/i);
      });
    }
  });

  describe('scope', function () {
    it('refuses an unknown scope value with invalid_scope', async function () {
      const { page, capture, auth } = await prepare({ scope: 'api admin' }, { vetted: true });
      await page.goto(auth.url);

      const redirect = await capture.next();
      expectErrorRedirect(redirect, auth, 'invalid_scope');
    });

    it('names an unknown resource back with only the characters RFC 6749 allows in error_description: in a redirect, a form_post, and a held error\'s way back by link or by form', async function () {
      const resource = 'https://bücher.example/"api"';
      const described = 'unknown resource https://b%C3%BCcher.example/%22api%22; this server issues tokens for the APIs its operator registered';
      const redirected = await prepare({ resource }, { vetted: true });
      await redirected.page.goto(redirected.auth.url);
      const redirect = await redirected.capture.next();
      expectErrorRedirect(redirect, redirected.auth, 'invalid_target');
      expect(redirect.url.searchParams.get('error_description')).to.equal(described);

      const posting = await prepare({ resource, response_mode: 'form_post' }, { vetted: true });
      await posting.page.goto(posting.auth.url);
      expect(new URLSearchParams((await posting.capture.next()).body ?? '').get('error_description')).to.equal(described);

      const held = await prepare({ resource });
      await held.page.goto(held.auth.url);
      const back = new URL((await held.page.getByRole('link', { name: /^Return to / }).getAttribute('href'))!);
      expect(back.searchParams.get('error_description')).to.equal(described);

      const heldPost = await prepare({ resource, response_mode: 'form_post' });
      await heldPost.page.goto(heldPost.auth.url);
      await heldPost.page.getByRole('button', { name: /^Return to / }).click();
      expect(new URLSearchParams((await heldPost.capture.next()).body ?? '').get('error_description')).to.equal(described);
    });

    it('defaults to api when no scope is asked for', async function () {
      const user = await seedUser(server, [{ workspace: 'Default Scope' }]);
      const { client, page, capture, auth } = await prepare({ scope: undefined });
      const redirect = await fullFlow(page, user, auth, capture);

      const tokens = await exchange(client, redirect.url, auth);
      expect(tokens.scope).to.equal('api');
      expect(decodeJwt(tokens.access_token).scope).to.equal('api');
    });
  });

  describe('clickjacking and forged forms', function () {
    it('serves the login and consent pages with X-Frame-Options DENY and frame-ancestors none', async function () {
      const user = await seedUser(server, [{ workspace: 'Frames' }]);
      const { page, capture, auth } = await prepare();
      const pages: PageResponse[] = [];
      page.on('response', (response: PageResponse) => {
        if (response.request().method() === 'GET' && new URL(response.url()).pathname.startsWith('/interaction/')) pages.push(response);
      });

      await fullFlow(page, user, auth, capture);
      expect(pages, 'a login and a consent page').to.have.length(2);
      for (const response of pages) {
        const headers = response.headers();
        expect(headers['x-frame-options'], response.url()).to.equal('DENY');
        expect(headers['content-security-policy'], response.url()).to.include("frame-ancestors 'none'");
      }
    });

    it('refuses a login form with a forged csrf value (403) and does not log in', async function () {
      const user = await seedUser(server, [{ workspace: 'Forgery' }]);
      const { client, page, capture, auth } = await prepare();

      await page.goto(auth.url);
      await page.evaluate(() => {
        const field = document.querySelector<HTMLInputElement>('input[name="csrf"]');
        if (!field) throw new Error('no csrf field on the login page');
        field.value = 'forged-csrf-value';
      });
      const posted = page.waitForResponse((response) => response.request().method() === 'POST' && response.url().endsWith('/login'));
      await signIn(page, user);
      expect((await posted).status()).to.equal(403);
      await page.waitForLoadState();
      expect(await consentHeading(page).count()).to.equal(0);
      expect(capture.hits).to.have.length(0);

      // Still not logged in: a new authorization in the same browser asks for the password.
      await page.goto(authorization(client).url);
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      expect(await page.getByLabel('Password').isVisible()).to.equal(true);
      expect(capture.hits).to.have.length(0);
    });
  });

  it('fits a 360 px phone screen (and saves a screenshot of the consent page to /tmp/consent.png)', async function () {
    const user = await seedUser(server, [{ workspace: 'A workspace with a rather long name for a phone screen' }, { workspace: 'Second', role: 'member' }]);
    const client = await newClient({ client_name: 'Phone Friendly Application With A Long Name' });
    const page = await open({ viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    await captureRedirect(page, REDIRECT_URI);

    await page.goto(authorization(client).url);
    await page.getByLabel('Email').waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth), 'login page width').to.be.at.most(360);
    const submit = page.getByRole('button', { name: 'Sign in' });
    expect(await submit.isVisible()).to.equal(true);
    const box = await submit.boundingBox();
    expect(box, 'submit button box').to.not.equal(null);
    expect(box!.x).to.be.at.least(0);
    expect(box!.x + box!.width).to.be.at.most(360);

    await signIn(page, user);
    await consentHeading(page).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth), 'consent page width').to.be.at.most(360);
    await page.screenshot({ path: '/tmp/consent.png', fullPage: true });
  });

  it('loads nothing from anywhere but the server', async function () {
    const user = await seedUser(server, [{ workspace: 'Self Contained' }]);
    const client = await newClient();
    const page = await open();
    const requests = recordRequests(page);
    const capture = await captureRedirect(page, REDIRECT_URI);
    const auth = authorization(client);

    await page.goto(auth.url);
    await signIn(page, user, 'wrong-password');
    await page.getByRole('alert').waitFor();
    await signIn(page, user);
    await consentHeading(page).waitFor();
    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    await capture.next();

    const urls = requests.map((request) => request.url());
    expect(urls.filter((url) => onServer(url) && url.includes('/interaction/')).length, 'the flow was recorded').to.be.at.least(4);
    const elsewhere = urls.filter((url) => !onServer(url) && !url.startsWith(REDIRECT_URI));
    expect(elsewhere, 'requests to other origins').to.deep.equal([]);
  });

  it('supports response_mode=form_post: the browser POSTs code, state and iss to the redirect URI', async function () {
    const user = await seedUser(server, [{ workspace: 'Form Post' }]);
    const { client, page, capture, auth } = await prepare({ response_mode: 'form_post' });

    const redirect = await fullFlow(page, user, auth, capture);
    expect(redirect.method).to.equal('POST');
    expect(`${redirect.url.origin}${redirect.url.pathname}`).to.equal(REDIRECT_URI);
    expect(redirect.url.search, 'nothing in the query').to.equal('');
    expect(redirect.contentType).to.match(/^application\/x-www-form-urlencoded/);
    const body = new URLSearchParams(redirect.body ?? '');
    expect(body.get('code')).to.be.a('string').and.not.equal('');
    expect(body.get('state')).to.equal(auth.state);
    expect(body.get('iss')).to.equal(server.issuer);

    const tokens = await exchange(client, body, auth);
    expect(decodeJwt(tokens.access_token).workspace_id).to.equal(user.workspaces[0]!.id);
  });

  it('shows the form_post answer in the service\'s layout to a browser that runs no script: it says where it goes, passes the audit, and Continue posts the code', async function () {
    const user = await seedUser(server, [{ workspace: 'Form Post Without Script' }]);
    const client = await newClient();
    const page = await open({ javaScriptEnabled: false });
    const capture = await captureRedirect(page, REDIRECT_URI);
    const auth = authorization(client, { response_mode: 'form_post' });
    await page.goto(auth.url);
    await signIn(page, user);
    await consentHeading(page).waitFor();
    await page.getByRole('button', { name: 'Allow', exact: true }).click();

    const continueButton = page.getByRole('button', { name: `Continue to ${client.client_name}` });
    await continueButton.waitFor();
    expect({
      lang: await page.locator('html').getAttribute('lang'),
      title: await page.title(),
      heading: await page.getByRole('heading', { level: 1 }).textContent(),
      focused: await page.evaluate(() => document.activeElement?.textContent?.trim()),
    }).to.deep.equal({
      lang: 'en',
      title: `Returning to ${client.client_name}`,
      heading: `Returning to ${client.client_name}`,
      focused: `Continue to ${client.client_name}`,
    });
    expect(await page.locator('main').textContent()).to.include('127.0.0.1');
    // axe runs only where script runs, and with script this page posts itself away: it audits a copy without its one script.
    const html = await page.content();
    const copy = await open();
    await copy.setContent(html.replace(/<script>[^<]*<\/script>/, ''));
    await checkPage(copy, 'form-post-without-script');

    await continueButton.click();
    const redirect = await capture.next();
    expect(redirect.method).to.equal('POST');
    const body = new URLSearchParams(redirect.body ?? '');
    expect(body.get('state')).to.equal(auth.state);
    expect(body.get('iss')).to.equal(server.issuer);
    const tokens = await exchange(client, body, auth);
    expect(decodeJwt(tokens.access_token).workspace_id).to.equal(user.workspaces[0]!.id);
  });
});
