import { expect } from 'chai';
import type { Page } from 'playwright-core';

import { browserForSuite, captureRedirect, type CapturedRequest, type RedirectCapture } from '../support/browser.ts';
import { codeRequest, exchangeCode, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { PHONE, checkPage } from '../support/page_audit.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';

/**
 * Sign-out in a real browser (Debian's Chromium): the confirmation page and the signed-out page,
 * the "Sign out" link on the consent page, the way back to the application, all under the pages'
 * Content-Security-Policy (no violation logged), with an axe-core audit and screenshots at phone
 * and desktop widths (test-output/screenshots/logout-*.png), as test/pages.browser.test.ts does
 * for the other pages.
 */

/** The application's side: requests there are answered inside the browser (captureRedirect), never sent. */
const APP_ORIGIN = 'http://127.0.0.1:9';
const SIGNED_OUT_URI = `${APP_ORIGIN}/signed-out`;

/** The browser's visits to the application (APP_ORIGIN), without the favicon requests its pages make. */
interface AppVisits {
  /** The paths visited so far, in order. */
  paths(): string[];
  /** The next visit not yet taken. */
  next(): Promise<CapturedRequest>;
}

function appVisits(capture: RedirectCapture): AppVisits {
  const isVisit = (hit: CapturedRequest) => hit.url.pathname !== '/favicon.ico';
  return {
    paths: () => capture.hits.filter(isVisit).map((hit) => hit.url.pathname),
    async next() {
      for (;;) {
        const hit = await capture.next();
        if (isVisit(hit)) return hit;
      }
    },
  };
}

interface Tab {
  page: Page;
  app: AppVisits;
  /** Every Content-Security-Policy violation the browser reported on its console. */
  cspViolations: string[];
}

describe('sign-out pages in a browser', function () {
  this.timeout(60_000);

  let server: TestServer;
  let user: SeededUser;
  let app: RegisteredClient;
  let service: string;
  const browser = browserForSuite({ viewport: PHONE });

  before(async function () {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Sign-out Co' }]);
    app = await registerClient(server.issuer, { client_name: 'Logout Browser App', post_logout_redirect_uris: [SIGNED_OUT_URI] });
    service = new URL(server.issuer).host;
  });

  after(async function () {
    await server?.stop();
  });

  async function open(): Promise<Tab> {
    const page = await browser.open();
    const cspViolations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    return { page, app: appVisits(await captureRedirect(page, `${APP_ORIGIN}/`)), cspViolations };
  }

  const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { level: 1, name });
  const logoutUrl = (params: Record<string, string> = {}) => `${server.issuer}/oauth/logout?${new URLSearchParams(params)}`;

  /** Signs in through the authorization endpoint (login, consent) and returns the redirect's code and the PKCE verifier. */
  async function signIn(tab: Tab, scope = 'api profile'): Promise<{ code: string; verifier: string }> {
    const request = codeRequest(server.issuer, app.client_id, { scope });
    await tab.page.goto(request.url);
    await tab.page.getByLabel('Email').fill(user.email);
    await tab.page.getByLabel('Password').fill(user.password);
    await tab.page.getByRole('button', { name: 'Sign in' }).click();
    await heading(tab.page, /^Authorize\b/).waitFor();
    await tab.page.getByRole('button', { name: 'Allow' }).click();
    const callback = await tab.app.next();
    return { code: callback.url.searchParams.get('code')!, verifier: request.verifier };
  }

  /** A new authorization request: 'login' if the browser is shown the sign-in page, 'signed in' if it goes straight back with a code. */
  async function nextAuthorization(tab: Tab): Promise<'login' | 'signed in'> {
    const before = tab.app.paths().length;
    await tab.page.goto(codeRequest(server.issuer, app.client_id).url);
    if (tab.app.paths().length > before) return (await tab.app.next()).url.searchParams.has('code') ? 'signed in' : 'login';
    await heading(tab.page, 'Sign in').waitFor();
    return 'login';
  }

  it('asks "Sign out of <service>?", signs out on "Sign out", says so, and the next authorization asks to sign in', async () => {
    const tab = await open();
    await signIn(tab);

    await tab.page.goto(logoutUrl());
    await heading(tab.page, `Sign out of ${service}?`).waitFor();
    expect(await tab.page.locator('main').innerText()).to.include(`You are signed in as ${user.email}`);
    await checkPage(tab.page, 'logout');

    await tab.page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await heading(tab.page, 'You are signed out').waitFor();
    expect(new URL(tab.page.url()).pathname).to.equal('/oauth/logout/success');
    await checkPage(tab.page, 'logout-signed-out');

    expect(await nextAuthorization(tab)).to.equal('login');
    expect(tab.cspViolations).to.deep.equal([]);
  });

  it('"Stay signed in" keeps the session: the page says so and the next authorization needs no sign-in', async () => {
    const tab = await open();
    await signIn(tab);
    await tab.page.goto(logoutUrl());
    await tab.page.getByRole('button', { name: 'Stay signed in' }).click();
    await heading(tab.page, 'You are still signed in').waitFor();
    await checkPage(tab.page, 'logout-stayed');
    expect(await nextAuthorization(tab)).to.equal('signed in');
    expect(tab.cspViolations).to.deep.equal([]);
  });

  it('a sign-out page answered after another tab\'s asks again, or says you are signed out already, and blames no application', async () => {
    const tab = await open();
    await signIn(tab);
    await tab.page.goto(logoutUrl());
    await heading(tab.page, `Sign out of ${service}?`).waitFor();
    // Opened later, in another tab: the engine keeps only this page's form.
    const later = await tab.page.context().newPage();
    await later.goto(logoutUrl());
    await heading(later, `Sign out of ${service}?`).waitFor();

    await tab.page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await tab.page.getByRole('status').waitFor();
    expect(await tab.page.getByRole('status').innerText()).to.include('was out of date');
    expect(await tab.page.locator('main').innerText()).to.include(`You are signed in as ${user.email}`).and.not.include('developer');
    await checkPage(tab.page, 'logout-asked-again');
    await tab.page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await heading(tab.page, 'You are signed out').waitFor();

    await later.getByRole('button', { name: 'Sign out', exact: true }).click();
    await heading(later, 'You are signed out').waitFor();
    const text = await later.locator('main').innerText();
    expect(text).to.include('already signed out').and.not.include('not signed out').and.not.include('developer');
    await checkPage(later, 'logout-already-signed-out');

    expect(await nextAuthorization(tab)).to.equal('login');
    expect(tab.cspViolations).to.deep.equal([]);
  });

  it('with id_token_hint and a registered post_logout_redirect_uri, names the application and sends the browser back there with state', async () => {
    const tab = await open();
    const { code, verifier } = await signIn(tab, 'openid api');
    const tokens = await (await exchangeCode(server.issuer, app, code, verifier)).json() as { id_token: string };

    await tab.page.goto(logoutUrl({ id_token_hint: tokens.id_token, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'back-to-app' }));
    await heading(tab.page, `Sign out of ${service}?`).waitFor();
    const text = await tab.page.locator('main').innerText();
    expect(text).to.include('Logout Browser App asked to sign you out');
    expect(text).to.include('you will be sent back to 127.0.0.1:9');
    await checkPage(tab.page, 'logout-from-app');

    await tab.page.getByRole('button', { name: 'Sign out', exact: true }).click();
    const back = await tab.app.next();
    expect(`${back.url.origin}${back.url.pathname}`).to.equal(SIGNED_OUT_URI);
    expect(back.url.searchParams.get('state')).to.equal('back-to-app');
    expect(await nextAuthorization(tab)).to.equal('login');
    expect(tab.cspViolations, 'the page\'s form-action allows the redirect to the application').to.deep.equal([]);
  });

  it('takes the logout request posted by the application\'s page, and no address the browser requests (so none in its history) holds the id_token_hint', async () => {
    const tab = await open();
    const { code, verifier } = await signIn(tab, 'openid api');
    const tokens = await (await exchangeCode(server.issuer, app, code, verifier)).json() as { id_token: string };
    const visited: string[] = [];
    tab.page.on('request', (request) => visited.push(request.url()));

    // The application's page (another site: an opaque origin) posts the form, as RP-Initiated Logout section 2 allows.
    const fields = { id_token_hint: tokens.id_token, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'posted-back' };
    const inputs = Object.entries(fields).map(([name, value]) => `<input type="hidden" name="${name}" value="${value}">`).join('');
    await tab.page.setContent(`<form method="post" action="${server.issuer}/oauth/logout">${inputs}<button>Sign out</button></form>`);
    await tab.page.getByRole('button', { name: 'Sign out' }).click();
    await heading(tab.page, `Sign out of ${service}?`).waitFor();
    expect(await tab.page.locator('main').innerText(), 'the session cookie came along').to.include('Logout Browser App asked to sign you out');

    await tab.page.getByRole('button', { name: 'Sign out', exact: true }).click();
    const back = await tab.app.next();
    expect(back.url.searchParams.get('state')).to.equal('posted-back');
    expect(visited.filter((url) => url.includes(tokens.id_token) || url.includes('id_token_hint')), 'no URL carried it').to.deep.equal([]);
    expect(await nextAuthorization(tab)).to.equal('login');
    expect(tab.cspViolations).to.deep.equal([]);
  });

  it('signs a browser with no session out at once (the engine\'s self-submitting form runs under the policy), and without id_token_hint offers the way back to a self-registered application as a link, never a redirect', async () => {
    const tab = await open();
    await tab.page.goto(logoutUrl({ client_id: app.client_id, post_logout_redirect_uri: SIGNED_OUT_URI, state: 'no-session' }));
    await heading(tab.page, 'You are signed out').waitFor();
    expect(tab.app.paths(), 'nothing reached the application by itself').to.deep.equal([]);
    expect(await tab.page.locator('main').innerText()).to.match(/not been checked by an administrator/);
    await checkPage(tab.page, 'logged-out-with-link-back');
    await tab.page.getByRole('link', { name: `Return to Logout Browser App at ${new URL(APP_ORIGIN).host}` }).click();
    const back = await tab.app.next();
    expect(back.url.searchParams.get('state')).to.equal('no-session');
    expect(tab.cspViolations).to.deep.equal([]);
  });

  it('shows an error page for an unregistered post_logout_redirect_uri and sends the browser nowhere', async () => {
    const tab = await open();
    await signIn(tab);
    const response = await tab.page.goto(logoutUrl({ client_id: app.client_id, post_logout_redirect_uri: `${APP_ORIGIN}/not-registered`, state: 'x' }));
    expect(response!.status()).to.equal(400);
    await heading(tab.page, 'Invalid request').waitFor();
    const text = await tab.page.locator('main').innerText();
    expect(text, 'in plain words').to.include('an address it has not registered').and.include('you were not signed out');
    expect(text, 'not the engine\'s words').to.not.include('post_logout_redirect_uri');
    expect(await tab.page.getByRole('link', { name: /home page$/ }).count(), 'a way on').to.equal(1);
    expect(await tab.page.getByRole('button', { name: 'Sign out', exact: true }).count()).to.equal(0);
    expect(tab.app.paths()).to.deep.equal(['/callback']);
    expect(await nextAuthorization(tab), 'still signed in').to.equal('signed in');
  });

  it('the consent page says who is signed in, and its "Sign out" link, reached with the keyboard, signs out', async () => {
    const tab = await open();
    await tab.page.goto(codeRequest(server.issuer, app.client_id).url);
    await tab.page.getByLabel('Email').fill(user.email);
    await tab.page.getByLabel('Password').fill(user.password);
    await tab.page.getByRole('button', { name: 'Sign in' }).click();
    await heading(tab.page, /^Authorize\b/).waitFor();
    const signedInAs = tab.page.locator('.signed-in-as');
    expect(await signedInAs.innerText()).to.match(new RegExp(`^Signed in as ${user.email.replace(/[.]/g, '\\.')}\\s*·\\s*Not you\\? Sign out$`));
    await checkPage(tab.page, 'logout-consent-signed-in-as');

    const link = tab.page.getByRole('link', { name: 'Sign out' });
    expect(await link.getAttribute('href')).to.equal('/oauth/logout');
    // Tab through the page until the link has the focus, then follow it with Enter.
    let focused = false;
    for (let presses = 0; presses < 15 && !focused; presses += 1) {
      await tab.page.keyboard.press('Tab');
      focused = await link.evaluate((element) => element === document.activeElement);
    }
    expect(focused, 'the link is reachable with Tab').to.equal(true);
    await tab.page.keyboard.press('Enter');
    await heading(tab.page, `Sign out of ${service}?`).waitFor();
    await tab.page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await heading(tab.page, 'You are signed out').waitFor();

    expect(await nextAuthorization(tab)).to.equal('login');
    expect(tab.app.paths(), 'nothing reached the application').to.deep.equal([]);
    expect(tab.cspViolations).to.deep.equal([]);
  });
});
