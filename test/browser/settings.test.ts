import { expect } from 'chai';
import type { Page, Request } from 'playwright-core';

import { openStore } from '../../adapters/index.ts';
import { answerLate, browserForSuite, captureRedirect, clickTwice, postsTo, recordRequests, sendFormCopy, signIn } from '../support/browser.ts';
import { api, clientCredentialsToken, createApiKey } from '../support/data_api.ts';
import { REDIRECT_URI, codeRequest, exchangeCode, postCredentials, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { PHONE, checkPage } from '../support/page_audit.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { sleep } from '../support/wait.ts';

interface Tokens {
  access_token: string;
  refresh_token: string;
}

/**
 * The settings area (`{issuer}/settings`) in Debian's Chromium against the real server process:
 * signing in with the engine's session, connected applications and revoking them, a workspace
 * admin's API keys and bound clients, CSRF, the keyboard, a phone's width, axe, and no request
 * leaving the server's origin.
 */
describe('settings area in a real browser', function () {
  this.timeout(30_000);

  let server: TestServer;
  const { open } = browserForSuite({ viewport: PHONE });
  let clientCount = 0;

  before(async function () {
    server = await startServer();
  });

  after(async function () {
    await server?.stop();
  });

  const settingsUrl = () => `${server.issuer}/settings`;

  /**
   * The id of the element with the focus once the page's `autofocus` has had its turn: the browser
   * moves the focus at a rendering step after the document is read, which may come after the
   * page's first elements can be found. Waits up to 2 s for `expected` to have it, then says who has.
   */
  async function focusedId(page: Page, expected: string): Promise<string | undefined> {
    await page.waitForFunction((id) => document.activeElement?.id === id, expected, { timeout: 2000 }).catch(() => undefined);
    return page.evaluate(() => document.activeElement?.id);
  }

  async function newClient(name?: string): Promise<RegisteredClient> {
    clientCount += 1;
    return registerClient(server.issuer, { client_name: name ?? `Settings Test App ${clientCount}` });
  }

  /** Opens the settings home, signing in on the way when the browser has no session. */
  async function openSettings(page: Page, user: SeededUser): Promise<void> {
    await page.goto(settingsUrl());
    if (await page.getByRole('heading', { level: 1, name: 'Sign in' }).isVisible()) await signIn(page, user);
    await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
  }

  /** The user authorizes the client in this browser (login if needed, consent: Allow); the client redeems the code. */
  async function authorizeIn(page: Page, user: SeededUser, client: RegisteredClient, scope = 'api profile'): Promise<Tokens> {
    const capture = await captureRedirect(page, REDIRECT_URI);
    const auth = codeRequest(server.issuer, client.client_id, { scope });
    await page.goto(auth.url);
    if (await page.getByRole('heading', { level: 1, name: 'Sign in' }).isVisible()) await signIn(page, user);
    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    const code = (await capture.next()).url.searchParams.get('code');
    const response = await exchangeCode(server.issuer, client, code!, auth.verifier);
    expect(response.status, 'code exchange').to.equal(200);
    return response.json() as Promise<Tokens>;
  }

  const refresh = (client: RegisteredClient, refreshToken: string) =>
    tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });

  /** The connected-application card of one client. */
  const appCard = (page: Page, name: string) => page.getByRole('listitem').filter({ has: page.getByRole('heading', { level: 3, name, exact: true }) });

  /** Revokes an application's access from its card: the card's button, then the confirmation page's. */
  async function revokeApp(page: Page, name: string): Promise<void> {
    await appCard(page, name).getByRole('link', { name: /^Revoke access/ }).click();
    await page.getByRole('heading', { level: 1, name: `Revoke access of ${name}?` }).waitFor();
    await page.getByRole('button', { name: 'Revoke access', exact: true }).click();
    await page.getByRole('status').waitFor();
  }

  /** Revokes an API key from its card on the workspace page, confirming it. */
  async function revokeKey(page: Page, name: string): Promise<void> {
    await page.getByRole('link', { name: `Revoke the key ${name}` }).click();
    await page.getByRole('heading', { level: 1, name: `Revoke the API key “${name}”?` }).waitFor();
    await page.getByRole('button', { name: 'Revoke the key', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'API key revoked' }).waitFor();
  }

  /** A card's facts (`<dl>`) as term -> description text. */
  async function facts(card: ReturnType<Page['locator']>): Promise<Record<string, string>> {
    return card.locator('dl.facts').evaluate((list) => {
      const out: Record<string, string> = {};
      for (const term of Array.from(list.querySelectorAll('dt'))) out[term.textContent!.trim()] = (term.nextElementSibling as HTMLElement).innerText.trim();
      return out;
    });
  }

  function expectOnlyServerRequests(requests: Request[]): void {
    const elsewhere = requests.map((request) => request.url()).filter((url) => !url.startsWith(`${server.origin}/`) && !url.startsWith(REDIRECT_URI));
    expect(elsewhere, 'requests that left the server').to.deep.equal([]);
  }

  describe('signing in', function () {
    it('sends a browser without a session through the login page, and back to the settings page it asked for', async function () {
      const user = await seedUser(server, [{ workspace: 'Sign-in Works' }]);
      const page = await open();
      const requests = recordRequests(page);

      await page.goto(`${settingsUrl()}/workspaces/${user.workspaces[0]!.id}`);
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      expect(await page.locator('main .sub').innerText(), 'named as the settings pages are headed').to.equal('to continue to Settings');
      await checkPage(page, 'settings-sign-in');
      await signIn(page, user, 'not the password');
      await page.getByRole('alert').waitFor();
      expect(await focusedId(page, 'password'), 'after a failed sign-in, the password field has the focus').to.equal('password');
      await page.keyboard.type(user.password);
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { level: 1, name: 'Sign-in Works' }).waitFor();
      expect(new URL(page.url()).pathname, 'no code or state left in the address bar').to.equal(`/settings/workspaces/${user.workspaces[0]!.id}`);
      expect(page.url()).to.not.include('?');

      // The same session as the authorization pages: an application's consent page asks for no login.
      const client = await newClient();
      await page.goto(codeRequest(server.issuer, client.client_id).url);
      await page.getByRole('button', { name: 'Allow', exact: true }).waitFor();
      expectOnlyServerRequests(requests);
    });

    it('returns a tab that set out to sign in from a deep page to that page, when another tab signed in first', async function () {
      const user = await seedUser(server, [{ workspace: 'Stale Tab Ltd' }]);
      const members = `/settings/workspaces/${user.workspaces[0]!.id}/members`;
      const deep = await open();
      const other = await deep.context().newPage();
      await deep.goto(`${server.issuer}${members}`);
      await deep.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await other.goto(settingsUrl());
      await other.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await signIn(other, user);
      await other.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();

      await signIn(deep, user);
      await deep.waitForURL((url) => url.pathname.startsWith('/settings') && url.pathname !== '/settings/callback');
      expect(new URL(deep.url()).pathname, 'the page it set out from').to.equal(members);
      await deep.getByRole('heading', { level: 1, name: 'Members of Stale Tab Ltd' }).waitFor();
    });

    it('signs out with the link at the top of the page: the next visit asks to sign in again', async function () {
      const user = await seedUser(server, [{ workspace: 'Sign-out Ltd' }]);
      const page = await open();
      await openSettings(page, user);
      const signedInAs = page.locator('main > .signed-in-as');
      expect(await signedInAs.innerText()).to.include(`Signed in as ${user.email}`);
      await signedInAs.getByRole('link', { name: 'Sign out' }).click();
      await page.getByRole('button', { name: 'Sign out', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Signed out' }).waitFor();

      await page.goto(settingsUrl());
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    });

    it('refuses a sign-in response this browser did not ask for; a signed-in browser just goes to its settings', async function () {
      const page = await open();
      const response = await page.goto(`${settingsUrl()}/callback?code=forged&state=forged`);
      expect(response!.status()).to.equal(400);
      expect(await page.getByRole('heading', { level: 1 }).innerText()).to.equal('This page has expired');

      const user = await seedUser(server, [{ workspace: 'Two Tabs Ltd' }]);
      await openSettings(page, user);
      await page.goto(`${settingsUrl()}/callback?code=stale&state=from-another-tab`);
      await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
      expect(new URL(page.url()).pathname).to.equal('/settings');
    });
  });

  describe('connected applications', function () {
    it('lists each application the user allowed: name, workspace, what it can do, when allowed, when last used', async function () {
      const user = await seedUser(server, [{ workspace: 'Listing Ltd' }]);
      const [first, second] = [await newClient('Expense Reports'), await newClient('Calendar Sync')];
      const page = await open();
      const before = Math.floor(Date.now() / 1000);
      await authorizeIn(page, user, first, 'api profile');
      await authorizeIn(page, user, second, 'api');
      const requests = recordRequests(page);

      await openSettings(page, user);
      expect(await appCard(page, 'Settings').count(), 'the sign-in client is not listed').to.equal(0);
      const expense = await facts(appCard(page, 'Expense Reports'));
      expect(expense.Workspace).to.equal('Listing Ltd');
      expect(expense.Can).to.include('Read the workspace’s records and metadata, and change them if your role there allows').and.include('See your name, email address and workspace');
      const calendar = await facts(appCard(page, 'Calendar Sync'));
      expect(calendar.Can).to.not.include('See your name');
      for (const card of [appCard(page, 'Expense Reports'), appCard(page, 'Calendar Sync')]) {
        for (const term of ['Allowed', 'Last used']) {
          const datetime = await card.locator('dt', { hasText: term }).locator('xpath=following-sibling::dd[1]/time').getAttribute('datetime');
          expect(Date.parse(datetime!) / 1000, `${term} is a time from this test`).to.be.within(before - 60, Date.now() / 1000 + 1);
        }
      }
      await checkPage(page, 'settings-connected-apps');
      expectOnlyServerRequests(requests);
    });

    it('revoking one stops its access token (data API 401) and its refresh token (invalid_grant) at once, and leaves the others working', async function () {
      const user = await seedUser(server, [{ workspace: 'Revoke Ltd' }]);
      const [revoked, kept] = [await newClient('To Be Revoked'), await newClient('To Be Kept')];
      const page = await open();
      const revokedTokens = await authorizeIn(page, user, revoked);
      const keptTokens = await authorizeIn(page, user, kept);
      expect((await api(server, '/rest/companies', { credential: revokedTokens.access_token })).status, 'works before').to.equal(200);

      await openSettings(page, user);
      await appCard(page, 'To Be Revoked').getByRole('link', { name: /^Revoke access/ }).click();
      await page.getByRole('heading', { level: 1, name: 'Revoke access of To Be Revoked?' }).waitFor();
      await checkPage(page, 'settings-confirm-app');
      await page.goBack();
      await revokeApp(page, 'To Be Revoked');
      expect(await page.getByRole('status').innerText()).to.include('Access revoked');
      expect(new URL(page.url()).pathname, 'back on the settings page (303 after the POST)').to.equal('/settings');
      expect(await appCard(page, 'To Be Revoked').count()).to.equal(0);
      expect(await appCard(page, 'To Be Kept').count()).to.equal(1);

      const refused = await api(server, '/rest/companies', { credential: revokedTokens.access_token });
      expect(refused.status).to.equal(401);
      expect(refused.headers.get('www-authenticate')).to.include('error="invalid_token"');
      const refreshed = await refresh(revoked, revokedTokens.refresh_token);
      expect(refreshed.status).to.equal(400);
      expect(((await refreshed.json()) as { error: string }).error).to.equal('invalid_grant');

      expect((await api(server, '/rest/companies', { credential: keptTokens.access_token })).status, 'the other application still works').to.equal(200);
      expect((await refresh(kept, keptTokens.refresh_token)).status).to.equal(200);
    });

    it('lists an application allowed in two browsers once, and revoking it ends the access it got in both', async function () {
      const user = await seedUser(server, [{ workspace: 'Two Browsers Ltd' }]);
      const client = await newClient('Everywhere App');
      const [laptop, phone] = [await open(), await open()];
      const fromLaptop = await authorizeIn(laptop, user, client, 'api');
      // Another application in between, then the first again: the list is newest allowed first.
      await sleep(1100);
      await authorizeIn(laptop, user, await newClient('In Between App'), 'api');
      await sleep(1100);
      const fromPhone = await authorizeIn(phone, user, client, 'api profile');

      await openSettings(laptop, user);
      expect(await appCard(laptop, 'Everywhere App').count(), 'one row for the application in that workspace').to.equal(1);
      const names = await laptop.getByRole('heading', { level: 3 }).allInnerTexts();
      expect(names.indexOf('Everywhere App'), `${names.join(', ')}: allowed last, listed first`).to.be.lessThan(names.indexOf('In Between App'));
      const allowedAt = async (name: string) => Date.parse((await appCard(laptop, name).locator('dt', { hasText: 'Allowed' }).locator('xpath=following-sibling::dd[1]/time').getAttribute('datetime'))!);
      expect(await allowedAt('Everywhere App'), 'allowed when it was last allowed').to.be.greaterThan(await allowedAt('In Between App'));
      expect((await facts(appCard(laptop, 'Everywhere App'))).Can, 'what it can do in either').to.include('See your name');
      await revokeApp(laptop, 'Everywhere App');
      expect(await appCard(laptop, 'Everywhere App').count()).to.equal(0);
      for (const [where, tokens] of [['laptop', fromLaptop], ['phone', fromPhone]] as const) {
        expect((await api(server, '/rest/companies', { credential: tokens.access_token })).status, `${where}: access token`).to.equal(401);
        expect((await refresh(client, tokens.refresh_token)).status, `${where}: refresh token`).to.equal(400);
      }
    });

    it('records the last use at refresh, and the page shows it', async function () {
      const user = await seedUser(server, [{ workspace: 'Refresh Ltd' }]);
      const client = await newClient('Refreshing App');
      const page = await open();
      const tokens = await authorizeIn(page, user, client);

      // The code exchange recorded a use just now: move it an hour back, so that only the refresh can make it recent.
      const store = openStore(server.store);
      try {
        const [grant] = await store.model('Grant').listBy(user.id);
        const activity = store.model('GrantActivity');
        const recorded = await activity.find(grant!.id);
        expect(recorded?.lastUsedAt, 'the code exchange is a use').to.be.a('number');
        const expiresIn = (grant!.payload.exp as number) - Math.floor(Date.now() / 1000);
        await activity.upsert(grant!.id, { ...recorded, lastUsedAt: (recorded!.lastUsedAt as number) - 3600 }, expiresIn);
      } finally {
        await store.close();
      }

      // The instance that served the code exchange skips writes for this grant for a minute (in its memory, whatever the
      // store says): the refresh goes to another instance over the same store, which has written nothing for it yet.
      const other = await startServer({ store: server.store, env: { BASE_URL: server.issuer } });
      try {
        const refreshed = await tokenRequest(other.origin, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(client) });
        expect(refreshed.status).to.equal(200);
        // The last use is written in the background after the answer: wait for it before stopping the instance.
        const written = openStore(server.store);
        try {
          const [grant] = await written.model('Grant').listBy(user.id);
          for (const deadline = Date.now() + 5000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 100))) {
            const lastUsedAt = (await written.model('GrantActivity').find(grant!.id))?.lastUsedAt;
            if (typeof lastUsedAt === 'number' && Date.now() / 1000 - lastUsedAt < 60) break;
          }
        } finally {
          await written.close();
        }
      } finally {
        await other.stop();
      }
      await openSettings(page, user);
      const card = appCard(page, 'Refreshing App');
      expect((await facts(card))['Last used']).to.match(/UTC$/);
      const shown = await card.locator('dl.facts').evaluate((list) => {
        const term = Array.from(list.querySelectorAll('dt')).find((dt) => dt.textContent!.trim() === 'Last used');
        return term?.nextElementSibling?.querySelector('time')?.getAttribute('datetime') ?? null;
      });
      expect(shown, 'a <time datetime> for the last use').to.be.a('string');
      expect(Math.abs(Date.parse(shown!) - Date.now()), `last use ${shown}: the refresh, seconds ago`).to.be.lessThan(10_000);
    });

    it('can be revoked with the keyboard alone', async function () {
      const user = await seedUser(server, [{ workspace: 'Keyboard Revoke' }]);
      const client = await newClient('Keyboard App');
      const page = await open();
      const tokens = await authorizeIn(page, user, client);
      await openSettings(page, user);

      const button = appCard(page, 'Keyboard App').getByRole('link', { name: /^Revoke access/ });
      let reached = false;
      for (let i = 0; i < 15 && !reached; i += 1) {
        await page.keyboard.press('Tab');
        reached = await button.evaluate((element) => element === document.activeElement);
      }
      expect(reached, 'Tab reaches the Revoke button').to.equal(true);
      const focusStyle = await button.evaluate((element) => getComputedStyle(element).outlineStyle);
      expect(focusStyle, 'the focused button shows a focus outline').to.not.equal('none');
      await page.keyboard.press('Enter');
      // The confirmation page: Tab reaches its button too.
      await page.getByRole('heading', { level: 1, name: 'Revoke access of Keyboard App?' }).waitFor();
      const confirm = page.getByRole('button', { name: 'Revoke access', exact: true });
      reached = false;
      for (let i = 0; i < 10 && !reached; i += 1) {
        await page.keyboard.press('Tab');
        reached = await confirm.evaluate((element) => element === document.activeElement);
      }
      expect(reached, 'Tab reaches the confirmation button').to.equal(true);
      await page.keyboard.press('Enter');
      await page.getByRole('status').waitFor();
      expect((await api(server, '/rest/companies', { credential: tokens.access_token })).status).to.equal(401);
    });

    it('shows a user with nothing connected and no workspace what there is to see', async function () {
      const user = await seedUser(server, []);
      const page = await open();
      await openSettings(page, user);
      expect(await page.locator('main').innerText()).to.include('No application has access to your account')
        .and.include('You are not a member of any workspace');
      expect(await page.getByRole('heading', { name: 'API keys' }).count()).to.equal(0);
      await checkPage(page, 'settings-empty');
    });
  });

  describe('a workspace admin', function () {
    it('creates an API key (shown once, copied with the button), sees it listed, uses it at /rest, and revokes it (401)', async function () {
      const admin = await seedUser(server, [{ workspace: 'Keys Inc' }]);
      const page = await open({ permissions: ['clipboard-read', 'clipboard-write'] });
      const requests = recordRequests(page);
      await openSettings(page, admin);
      await page.getByRole('link', { name: /^API keys and applications/ }).click();
      await page.getByRole('heading', { level: 1, name: 'Keys Inc' }).waitFor();
      await checkPage(page, 'settings-workspace-empty');

      await page.getByLabel('Name').fill('nightly export');
      await page.getByLabel('Expires after').selectOption('30d');
      const created = page.waitForResponse((response) => response.request().method() === 'POST');
      await page.getByRole('button', { name: 'Create key' }).click();
      expect((await created).headers()['cache-control']).to.equal('no-store');
      await page.getByRole('heading', { level: 1, name: 'API key created' }).waitFor();
      const key = await page.getByLabel(/The key “nightly export”/).inputValue();
      expect(key).to.match(/^wsk_[0-9A-Za-z]{38}$/);
      expect(page.url(), 'the key is not in the address').to.not.include(key);

      const copy = page.getByRole('button', { name: 'Copy key' });
      // The script shows the copy button (it runs once the page is parsed: waited for, not assumed).
      await copy.waitFor({ state: 'visible' });
      await copy.click();
      await page.getByRole('status').filter({ hasText: 'Copied.' }).waitFor();
      expect(await page.evaluate(() => navigator.clipboard.readText()), 'the clipboard holds the key').to.equal(key);
      await checkPage(page, 'settings-key-created');

      expect((await api(server, '/rest/companies', { credential: key })).status, 'the key works').to.equal(200);

      await page.getByRole('link', { name: /^Done: back to the API keys/ }).click();
      const card = page.getByRole('list', { name: 'API keys' }).getByRole('listitem').filter({ hasText: 'nightly export' });
      const listed = await facts(card);
      expect(listed.Key).to.equal(`${key.slice(0, 8)}…`);
      expect(listed['Last used']).to.match(/UTC$/);
      expect(listed.Expires).to.match(/UTC$/);
      expect(await page.locator('main').innerText(), 'the key is never shown again').to.not.include(key);
      await checkPage(page, 'settings-workspace-keys');

      await card.getByRole('link', { name: 'Revoke the key nightly export' }).click();
      await page.getByRole('heading', { level: 1, name: 'Revoke the API key “nightly export”?' }).waitFor();
      await checkPage(page, 'settings-confirm-key');
      await page.goBack();
      await revokeKey(page, 'nightly export');
      expect(await page.getByRole('list', { name: 'API keys' }).count()).to.equal(0);
      const refused = await api(server, '/rest/companies', { credential: key });
      expect(refused.status).to.equal(401);
      expectOnlyServerRequests(requests);
    });

    it('creates no second key when the page that showed one is reloaded (the form sent again)', async function () {
      const admin = await seedUser(server, [{ workspace: 'Reload Ltd' }]);
      const page = await open();
      await openSettings(page, admin);
      await page.getByRole('link', { name: /^API keys and applications/ }).click();
      await page.getByLabel('Name').fill('nightly export');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('heading', { level: 1, name: 'API key created' }).waitFor();

      const again = await page.reload();
      expect(again!.request().method(), 'the browser sent the form again').to.equal('POST');
      expect(again!.status()).to.equal(409);
      await page.getByRole('alert').filter({ hasText: 'its first sending created the key “nightly export”: no second key was created' }).waitFor();
      const keys = page.getByRole('list', { name: 'API keys' }).getByRole('listitem').filter({ hasText: 'nightly export' });
      expect(await keys.count(), 'one key, the one shown').to.equal(1);
      await checkPage(page, 'settings-key-form-sent-again');
    });

    it('sends the create form once when its button is clicked twice, 80 ms apart: one POST, and the page shows the key it made', async function () {
      const admin = await seedUser(server, [{ workspace: 'Double Click Ltd' }]);
      const page = await open();
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      const posts = postsTo(page, `/settings/workspaces/${admin.workspaces[0]!.id}/api-keys`);
      await page.getByLabel('Name').fill('clicked twice');
      // A server slower to answer than the two clicks are apart.
      await answerLate(page, '**/api-keys', 300);
      await clickTwice(page, page.getByRole('button', { name: 'Create key' }));
      await page.getByRole('heading', { level: 1, name: 'API key created' }).waitFor();
      expect(await page.getByLabel(/The key “clicked twice”/).inputValue()).to.match(/^wsk_/);
      expect(posts().length, 'the form was sent once').to.equal(1);
      const keys = await server.admin(['api-key', 'list', '--workspace', admin.workspaces[0]!.id]);
      expect(keys.stdout.match(/clicked twice/g)?.length, 'one key made').to.equal(1);
    });

    it('keeps the name and value of the button that sent a form, sends nothing more while it is under way, and sends again after a return from the back/forward cache', async function () {
      const admin = await seedUser(server, [{ workspace: 'Submitter Ltd' }]);
      const page = await open();
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      // The answer is held back (204: the browser stays on the page), as a slow one would be.
      const bodies: string[] = [];
      await page.route('**/api-keys', (route) => {
        bodies.push(route.request().postData() ?? '');
        return route.fulfill({ status: 204 });
      });
      const button = page.getByRole('button', { name: 'Create key' });
      await button.evaluate((element: HTMLButtonElement) => { element.name = 'intent'; element.value = 'create'; });
      await page.getByLabel('Name').fill('held back');
      await button.click();
      await page.waitForFunction(() => (document.querySelector('form.create-key button') as HTMLButtonElement).disabled);
      for (let wait = 0; wait < 50 && bodies.length < 1; wait += 1) await sleep(20);
      expect(bodies, 'sent once, with its button').to.have.length(1);
      expect(new URLSearchParams(bodies[0]).get('intent')).to.equal('create');
      await page.getByLabel('Name').press('Enter');
      await sleep(300);
      expect(bodies, 'nothing more while it is under way').to.have.length(1);

      await page.evaluate(() => window.dispatchEvent(new PageTransitionEvent('pageshow', { persisted: true })));
      expect(await button.isEnabled(), 'enabled again').to.equal(true);
      await button.click();
      await page.waitForFunction(() => (document.querySelector('form.create-key button') as HTMLButtonElement).disabled);
      for (let wait = 0; wait < 50 && bodies.length < 2; wait += 1) await sleep(20);
      expect(bodies, 'sent again after the page was shown again').to.have.length(2);
      expect(new URLSearchParams(bodies[1]).get('intent')).to.equal('create');
    });

    it('lets a form be sent again once its sending was stopped (the browser\'s stop button, or Esc) before an answer came', async function () {
      const admin = await seedUser(server, [{ workspace: 'Stopped Ltd' }]);
      const page = await open();
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      // No answer comes: the sending stays under way until it is stopped.
      const sent: string[] = [];
      await page.route('**/api-keys', (route) => {
        sent.push(route.request().postData() ?? '');
      });
      /**
       * Sends the form: Enter in its name field, which keeps the focus (a click, or any locator,
       * would wait for the page, which no answer comes to); resolves how many sendings reached the
       * server 300 ms later.
       */
      const send = async () => {
        await page.keyboard.press('Enter');
        await sleep(300);
        return sent.length;
      };
      await page.getByLabel('Name').fill('stopped');
      expect(await send()).to.equal(1);
      expect(await send(), 'nothing more while it is under way').to.equal(1);

      // The stop button: what Chromium does for it (the DevTools protocol's Page.stopLoading).
      await (await page.context().newCDPSession(page)).send('Page.stopLoading');
      // The page, no longer waiting for an answer, can be read again: its button, enabled (at once with the fix).
      await page.waitForFunction(() => !document.querySelector<HTMLButtonElement>('form.create-key button')!.disabled, undefined, { timeout: 2000 }).catch(() => undefined);
      expect(await send(), 'sent again after the stop').to.equal(2);
      expect(await send(), 'and once only').to.equal(2);

      await page.keyboard.press('Escape');
      expect(await send(), 'sent again after Esc').to.equal(3);
    });

    it('names the key a first sending of the create form made when the form comes again (its first answer lost), and says to revoke it if its secret was not copied', async function () {
      const admin = await seedUser(server, [{ workspace: 'Lost Answer Ltd' }]);
      const page = await open({ javaScriptEnabled: false });
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      await page.getByLabel('Name').fill('lost answer');
      const first = await sendFormCopy(page, page.locator('form.create-key'));
      expect(first.status, 'the first sending made the key').to.equal(200);
      const again = page.waitForResponse((response) => response.request().method() === 'POST');
      await page.getByRole('button', { name: 'Create key' }).click();
      expect((await again).status()).to.equal(409);
      const alert = await page.getByRole('alert').innerText();
      expect(alert).to.include('its first sending created the key “lost answer”')
        .and.to.include('shown only in the answer to that first sending')
        .and.to.include('If you did not copy it, revoke “lost answer” (it is in the list below) and create another');
      expect(alert).to.not.match(/no key was created(?! again)/i);
      const keys = page.getByRole('list', { name: 'API keys' }).getByRole('listitem').filter({ hasText: 'lost answer' });
      expect(await keys.count(), 'the one key, listed').to.equal(1);
    });

    it('without JavaScript still gets the key, in a field to copy by hand, and no copy button', async function () {
      const admin = await seedUser(server, [{ workspace: 'No Script Co' }]);
      const page = await open({ javaScriptEnabled: false });
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      await page.getByLabel('Name').fill('by hand');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('heading', { level: 1, name: 'API key created' }).waitFor();
      expect(await page.getByLabel(/The key “by hand”/).inputValue()).to.match(/^wsk_/);
      expect(await page.getByRole('button', { name: 'Copy key' }).count(), 'hidden without the script').to.equal(0);
    });

    it('sees a new key whole on a phone (390 px): nothing clipped, and selected in one go', async function () {
      const admin = await seedUser(server, [{ workspace: 'Phone Keys' }]);
      const page = await open();
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      await page.getByLabel('Name').fill('on a phone');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('heading', { level: 1, name: 'API key created' }).waitFor();
      await checkPage(page, 'settings-key-created-phone');

      const field = page.getByLabel(/The key “on a phone”/);
      const key = await field.inputValue();
      expect(key).to.match(/^wsk_[0-9A-Za-z]{38}$/);
      const shown = await field.evaluate((element: HTMLTextAreaElement) => {
        const box = element.getBoundingClientRect();
        return {
          scrollWidth: element.scrollWidth, clientWidth: element.clientWidth, scrollHeight: element.scrollHeight, clientHeight: element.clientHeight,
          left: box.left, right: box.right, viewport: document.documentElement.clientWidth,
        };
      });
      expect(shown.viewport).to.equal(PHONE.width);
      expect(shown.scrollWidth, 'no part of the key scrolled out sideways').to.be.at.most(shown.clientWidth);
      expect(shown.scrollHeight, 'nor below').to.be.at.most(shown.clientHeight);
      expect(shown.left).to.be.at.least(0);
      expect(shown.right, 'the field fits the screen').to.be.at.most(shown.viewport);

      const selected = (locator: typeof field) => locator.evaluate((element: HTMLTextAreaElement) => element.value.slice(element.selectionStart, element.selectionEnd));
      await field.click({ clickCount: 3 });
      expect(await selected(field), 'a triple click selects the whole key').to.equal(key);
      await field.click();
      await page.keyboard.press('Control+A');
      expect(await selected(field), 'select all in the field: the whole key').to.equal(key);
    });

    it('is told what is wrong with the form (400), the name given is kept, and the cursor waits in the field to fix', async function () {
      const admin = await seedUser(server, [{ workspace: 'Bad Input Ltd' }]);
      const page = await open();
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      await page.getByLabel('Name').fill('x'.repeat(100));
      await page.getByLabel('Name').evaluate((input: HTMLInputElement) => { input.maxLength = 500; input.value = 'y'.repeat(101); });
      const answer = page.waitForResponse((response) => response.request().method() === 'POST');
      await page.getByRole('button', { name: 'Create key' }).click();
      expect((await answer).status()).to.equal(400);
      expect(await page.getByRole('alert').innerText()).to.include('1 to 100 printable characters');
      expect(await page.getByLabel('Name').inputValue()).to.equal('y'.repeat(101));
      expect(await focusedId(page, 'key-name'), 'the focus').to.equal('key-name');
      expect(await page.getByLabel('Name').getAttribute('aria-invalid')).to.equal('true');
      await checkPage(page, 'settings-workspace-error');
    });

    it('takes a key name of 100 emoji, the longest the server takes, whole (a browser\'s maxlength counts an emoji as two), and refuses one more in words', async function () {
      const admin = await seedUser(server, [{ workspace: 'Emoji Keys Ltd' }]);
      const page = await open();
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      const name = page.getByLabel('Name');
      await name.fill('\u{1F511}'.repeat(101));
      expect(await name.inputValue(), 'nothing cut by the browser').to.equal('\u{1F511}'.repeat(101));
      const answer = page.waitForResponse((response) => response.request().method() === 'POST');
      await page.getByRole('button', { name: 'Create key' }).click();
      expect((await answer).status()).to.equal(400);
      expect(await page.getByRole('alert').innerText()).to.include('1 to 100 printable characters');

      const longest = '\u{1F511}'.repeat(100);
      await name.fill(longest);
      expect(await name.inputValue(), 'nothing cut by the browser').to.equal(longest);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('heading', { level: 1, name: 'API key created' }).waitFor();
      expect(await page.getByLabel(`The key “${longest}”`).inputValue()).to.match(/^wsk_/);
    });

    it('sees the clients bound to the workspace, never their secrets', async function () {
      const admin = await seedUser(server, [{ workspace: 'Bound Clients Co' }]);
      const { client } = await clientCredentialsToken(server, admin.workspaces[0]!.id);
      const page = await open();
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      const card = page.getByRole('list', { name: 'Applications bound to this workspace' }).getByRole('listitem');
      expect(await card.count()).to.equal(1);
      const shown = await facts(card);
      expect(shown['Client ID']).to.equal(client.client_id);
      expect(shown['Grant types']).to.equal('client_credentials');
      const html = await page.content();
      expect(html).to.not.include(client.client_secret!);
      expect(html).to.not.include(client.registration_access_token);
    });
  });

  describe('confirmations', function () {
    it('asks before revoking an application or an API key, on a page that works without JavaScript; keeping changes nothing', async function () {
      const admin = await seedUser(server, [{ workspace: 'Careful Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const client = await newClient('Careful App');
      const page = await open({ javaScriptEnabled: false });
      const tokens = await authorizeIn(page, admin, client);
      await openSettings(page, admin);

      await appCard(page, 'Careful App').getByRole('link', { name: /^Revoke access/ }).click();
      await page.getByRole('heading', { level: 1, name: 'Revoke access of Careful App?' }).waitFor();
      expect(new URL(page.url()).pathname).to.equal('/settings/applications/revoke');
      expect(await page.locator('main').innerText()).to.include('Careful Ltd').and.include('stop working at once');
      await page.getByRole('link', { name: 'Keep its access' }).click();
      await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
      expect(await appCard(page, 'Careful App').count(), 'kept').to.equal(1);
      expect((await api(server, '/rest/companies', { credential: tokens.access_token })).status, 'still works').to.equal(200);
      await revokeApp(page, 'Careful App');
      expect((await api(server, '/rest/companies', { credential: tokens.access_token })).status).to.equal(401);

      const { key, id } = await createApiKey(server, workspaceId, { name: 'careful key' });
      await page.goto(`${settingsUrl()}/workspaces/${workspaceId}`);
      await page.getByRole('link', { name: 'Revoke the key careful key' }).click();
      await page.getByRole('heading', { level: 1, name: 'Revoke the API key “careful key”?' }).waitFor();
      expect(page.url(), 'the key\'s id, never the key, in the address').to.include(id).and.not.include(key);
      await page.getByRole('link', { name: 'Keep the key' }).click();
      await page.getByRole('heading', { level: 1, name: 'Careful Ltd' }).waitFor();
      expect((await api(server, '/rest/companies', { credential: key })).status, 'the kept key works').to.equal(200);
      await revokeKey(page, 'careful key');
      expect((await api(server, '/rest/companies', { credential: key })).status).to.equal(401);
    });

    it('ends a confirmation sent twice (its first answer lost) where one sending ends: the key revoked, not "no such API key"', async function () {
      const admin = await seedUser(server, [{ workspace: 'Revoked Twice Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const { key } = await createApiKey(server, workspaceId, { name: 'revoked twice' });
      const page = await open({ javaScriptEnabled: false });
      await openSettings(page, admin);
      await page.goto(`${settingsUrl()}/workspaces/${workspaceId}`);
      await page.getByRole('link', { name: 'Revoke the key revoked twice' }).click();
      await page.getByRole('heading', { level: 1, name: 'Revoke the API key “revoked twice”?' }).waitFor();
      const first = await sendFormCopy(page, page.locator('form.confirm'));
      expect(first.status).to.equal(303);
      expect((await api(server, '/rest/companies', { credential: key })).status, 'revoked by the first sending').to.equal(401);

      await page.getByRole('button', { name: 'Revoke the key', exact: true }).click();
      await page.getByRole('status').filter({ hasText: 'API key revoked' }).waitFor();
      expect(new URL(page.url()).pathname).to.equal(`/settings/workspaces/${workspaceId}`);
      expect(await page.getByRole('list', { name: 'API keys' }).count()).to.equal(0);
    });

    it('shows after a form only a sentence of its own: ?done= naming anything else, an inherited property of every object included, shows nothing', async function () {
      const user = await seedUser(server, [{ workspace: 'Status Ltd' }]);
      const page = await open();
      await openSettings(page, user);
      for (const done of ['constructor', 'toString', '__proto__', 'no-such-message']) {
        await page.goto(`${settingsUrl()}?done=${done}`);
        expect(await page.getByRole('status').count(), done).to.equal(0);
      }
      await page.goto(`${settingsUrl()}?done=app-revoked`);
      expect(await page.getByRole('status').innerText()).to.include('Access revoked');
    });

    it('shows an admin no confirmation page for another workspace\'s key (404), and its form revokes nothing there', async function () {
      const admin = await seedUser(server, [{ workspace: 'Mine Ltd' }]);
      const other = await seedUser(server, [{ workspace: 'Theirs Ltd' }]);
      const theirs = await createApiKey(server, other.workspaces[0]!.id, { name: 'their key' });
      const page = await open();
      await openSettings(page, admin);
      const mine = `${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`;
      const refused = await page.goto(`${mine}/api-keys/revoke?key=${theirs.id}`);
      expect(refused!.status()).to.equal(404);
      expect(await page.getByRole('link', { name: 'Back to settings' }).count()).to.equal(1);
      expect((await page.goto(`${settingsUrl()}/workspaces/${other.workspaces[0]!.id}/api-keys/revoke?key=${theirs.id}`))!.status(), 'their workspace').to.equal(404);

      const { id: ownKey } = await createApiKey(server, admin.workspaces[0]!.id, { name: 'own key' });
      await page.goto(`${mine}/api-keys/revoke?key=${ownKey}`);
      await page.locator('input[name="key"]').evaluate((input: HTMLInputElement, id: string) => { input.value = id; }, theirs.id);
      const answer = page.waitForResponse((response) => response.request().method() === 'POST');
      await page.getByRole('button', { name: 'Revoke the key', exact: true }).click();
      expect((await answer).status()).to.equal(404);
      expect((await api(server, '/rest/companies', { credential: theirs.key })).status, 'their key still works').to.equal(200);
    });
  });

  describe('a member or viewer', function () {
    it('sees no API keys, and is refused (403) the workspace page and its forms', async function () {
      this.timeout(60_000); // two users, each through a sign-in, a consent and four refusals
      const admin = await seedUser(server, [{ workspace: 'Roles Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      for (const role of ['member', 'viewer'] as const) {
        const user = await seedUser(server, []);
        expect((await server.admin(['member', 'add', '--user', user.id, '--workspace', workspaceId, '--role', role])).code).to.equal(0);
        const page = await open();
        // An application the user allowed: its confirmation page gives the browser a valid token to post with.
        const client = await newClient();
        await authorizeIn(page, user, client);
        await openSettings(page, user);
        expect(await page.getByRole('link', { name: /API keys/ }).count(), `${role}: no link to API keys`).to.equal(0);
        expect(await page.locator('main').innerText()).to.include(`Roles Ltd (${role})`);

        const refused = await page.goto(`${settingsUrl()}/workspaces/${workspaceId}`);
        expect(refused!.status(), `${role}: workspace page`).to.equal(403);
        expect(await page.getByRole('heading', { level: 1 }).innerText()).to.equal('Not allowed');
        expect(await page.locator('main').innerText()).to.include('Only an admin of this workspace');
        expect(await page.getByRole('heading', { name: 'API keys' }).count()).to.equal(0);

        // A form posted with the user's own session and its valid token: still 403; and the confirmation page too.
        await page.goto(settingsUrl());
        await appCard(page, client.client_name!).getByRole('link', { name: /^Revoke access/ }).click();
        await page.getByRole('heading', { level: 1, name: /^Revoke access of/ }).waitFor();
        expect((await page.goto(`${settingsUrl()}/workspaces/${workspaceId}/api-keys/revoke?key=key_x`))!.status(), `${role}: key confirmation`).to.equal(403);
        await page.goBack();
        for (const action of ['api-keys', 'api-keys/revoke']) {
          const status = await postFrom(page, `/settings/workspaces/${workspaceId}/${action}`, { name: 'sneaky', expires_in: '7d', key: 'key_x' });
          expect(status, `${role}: POST ${action}`).to.equal(403);
        }
      }
      expect((await server.admin(['api-key', 'list', '--workspace', workspaceId])).stdout.trim()).to.equal('(no API keys)');
    });

    it('gets 404 for a workspace it is not in', async function () {
      const stranger = await seedUser(server, [{ workspace: 'Elsewhere' }]);
      const other = await seedUser(server, [{ workspace: 'Private Ltd' }]);
      const page = await open();
      await openSettings(page, stranger);
      expect((await page.goto(`${settingsUrl()}/workspaces/${other.workspaces[0]!.id}`))!.status()).to.equal(404);
      expect(await page.getByRole('heading', { level: 1 }).innerText()).to.equal('Not found');
    });
  });

  /**
   * Posts a form with the browser's cookies (its context's request client shares its cookie jar)
   * and the csrf token of the page it shows, unless `fields` overrides it; resolves the status.
   */
  async function postFrom(page: Page, path: string, fields: Record<string, string>): Promise<number> {
    const tokens = page.locator('input[name="csrf"]');
    const token = await tokens.count() ? await tokens.first().inputValue() : '';
    const response = await page.request.post(`${server.origin}${path}`, { form: { csrf: token, ...fields }, maxRedirects: 0 });
    return response.status();
  }

  describe('with a second instance on the same store', function () {
    let second: TestServer;

    before(async function () {
      second = await startServer({ store: server.store, env: { BASE_URL: server.issuer } });
    });

    after(async function () {
      await second?.stop();
    });

    it('an application or key revoked on one instance is refused by the other once the page says so', async function () {
      const admin = await seedUser(server, [{ workspace: 'Two Instances Ltd' }]);
      const client = await newClient('Two Instance App');
      const page = await open();
      const tokens = await authorizeIn(page, admin, client);
      expect((await api(second, '/rest/companies', { credential: tokens.access_token })).status, 'the other instance accepts it first').to.equal(200);

      await openSettings(page, admin);
      await revokeApp(page, 'Two Instance App');
      expect((await api(second, '/rest/companies', { credential: tokens.access_token })).status, 'access token, other instance').to.equal(401);
      const refreshed = await tokenRequest(second.origin, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(client) });
      expect(refreshed.status, 'refresh token, other instance').to.equal(400);

      await page.goto(`${settingsUrl()}/workspaces/${admin.workspaces[0]!.id}`);
      await page.getByLabel('Name').fill('shared');
      await page.getByRole('button', { name: 'Create key' }).click();
      const key = await page.getByLabel(/The key “shared”/).inputValue();
      expect((await api(second, '/rest/companies', { credential: key })).status, 'the key works at the other instance').to.equal(200);
      await page.getByRole('link', { name: /^Done/ }).click();
      await revokeKey(page, 'shared');
      expect((await api(second, '/rest/companies', { credential: key })).status, 'key, other instance').to.equal(401);
    });
  });

  describe('on Redis', function () {
    let redis: RedisServer;
    let onRedis: TestServer;

    before(async function () {
      redis = await startRedis();
      onRedis = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64url') } });
    });

    after(async function () {
      await onRedis?.stop();
      await redis?.stop();
    });

    it('lists and revokes an application, and lists a bound client, from the Redis indexes', async function () {
      const user = await seedUser(onRedis, [{ workspace: 'Redis Ltd' }]);
      const client = await registerClient(onRedis.issuer, { client_name: 'Redis App' });
      const { client: bound } = await clientCredentialsToken(onRedis, user.workspaces[0]!.id);
      const page = await open();
      const capture = await captureRedirect(page, REDIRECT_URI);
      const auth = codeRequest(onRedis.issuer, client.client_id);
      await page.goto(auth.url);
      await signIn(page, user);
      await page.getByRole('button', { name: 'Allow', exact: true }).click();
      const code = (await capture.next()).url.searchParams.get('code');
      const tokens = await (await exchangeCode(onRedis.issuer, client, code!, auth.verifier)).json() as Tokens;

      await page.goto(`${onRedis.issuer}/settings`);
      expect((await facts(appCard(page, 'Redis App'))).Workspace).to.equal('Redis Ltd');
      await revokeApp(page, 'Redis App');
      expect(await appCard(page, 'Redis App').count()).to.equal(0);
      expect((await api(onRedis, '/rest/companies', { credential: tokens.access_token })).status).to.equal(401);

      await page.goto(`${onRedis.issuer}/settings/workspaces/${user.workspaces[0]!.id}`);
      const shown = await facts(page.getByRole('list', { name: 'Applications bound to this workspace' }).getByRole('listitem'));
      expect(shown['Client ID']).to.equal(bound.client_id);
    });
  });

  describe('under an issuer with a path', function () {
    let below: TestServer;

    before(async function () {
      below = await startServer({ basePath: '/auth' });
    });

    after(async function () {
      await below?.stop();
    });

    it('signs in, revokes an application and shows a new key with its copy button, all under the issuer\'s path', async function () {
      const user = await seedUser(below, [{ workspace: 'Path Ltd' }]);
      const client = await registerClient(below.issuer, { client_name: 'Path App' });
      const page = await open();
      const requests = recordRequests(page);
      const capture = await captureRedirect(page, REDIRECT_URI);

      await page.goto(`${below.issuer}/settings`);
      await signIn(page, user);
      await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
      expect(new URL(page.url()).pathname).to.equal('/auth/settings');

      const auth = codeRequest(below.issuer, client.client_id);
      await page.goto(auth.url);
      await page.getByRole('button', { name: 'Allow', exact: true }).click();
      const code = (await capture.next()).url.searchParams.get('code');
      const tokens = await (await exchangeCode(below.issuer, client, code!, auth.verifier)).json() as Tokens;
      await page.goto(`${below.issuer}/settings`);
      await revokeApp(page, 'Path App');
      expect(new URL(page.url()).pathname).to.equal('/auth/settings');
      expect((await api(below, '/rest/companies', { credential: tokens.access_token })).status).to.equal(401);

      await page.getByRole('link', { name: /^API keys and applications/ }).click();
      await page.getByLabel('Name').fill('under a path');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('heading', { level: 1, name: 'API key created' }).waitFor();
      // The script, loaded from under the path, shows the copy button.
      await page.getByRole('button', { name: 'Copy key' }).waitFor({ state: 'visible' });
      const elsewhere = requests.map((request) => request.url()).filter((url) => !url.startsWith(`${below.issuer}/`) && !url.startsWith(REDIRECT_URI));
      expect(elsewhere, 'every request under the issuer').to.deep.equal([]);
    });
  });

  describe('forms', function () {
    it('refuses a forged form: no token, another session\'s token, or no session at all (403), and changes nothing', async function () {
      const user = await seedUser(server, [{ workspace: 'Forgery Ltd' }]);
      const client = await newClient('Forgery Target');
      const page = await open();
      const tokens = await authorizeIn(page, user, client);
      await openSettings(page, user);
      const grant = new URL((await appCard(page, 'Forgery Target').getByRole('link', { name: /^Revoke access/ }).getAttribute('href'))!, server.origin).searchParams.get('grant')!;
      // The confirmation page: the form with this session's token.
      await appCard(page, 'Forgery Target').getByRole('link', { name: /^Revoke access/ }).click();
      await page.getByRole('heading', { level: 1, name: 'Revoke access of Forgery Target?' }).waitFor();

      expect(await postFrom(page, '/settings/applications/revoke', { grant, csrf: '' }), 'no token').to.equal(403);
      expect(await postFrom(page, '/settings/applications/revoke', { grant, csrf: 'A'.repeat(43) }), 'a made-up token').to.equal(403);

      // Another user's browser, with its own valid token, naming this user's grant: not found, nothing revoked.
      const other = await seedUser(server, [{ workspace: 'Other Forgery' }]);
      const otherPage = await open();
      const otherClient = await newClient();
      await authorizeIn(otherPage, other, otherClient);
      await openSettings(otherPage, other);
      await appCard(otherPage, otherClient.client_name!).getByRole('link', { name: /^Revoke access/ }).click();
      await otherPage.getByRole('heading', { level: 1, name: /^Revoke access of/ }).waitFor();
      expect((await otherPage.goto(`${settingsUrl()}/applications/revoke?grant=${encodeURIComponent(grant)}`))!.status(), 'the confirmation page of someone else\'s grant').to.equal(404);
      await otherPage.goBack();
      const sameTokenElsewhere = await page.locator('input[name="csrf"]').first().inputValue();
      expect(await postFrom(otherPage, '/settings/applications/revoke', { grant, csrf: sameTokenElsewhere }), 'another session\'s token').to.equal(403);
      expect(await postFrom(otherPage, '/settings/applications/revoke', { grant }), 'someone else\'s grant').to.equal(404);

      // No session: a plain cross-site POST (no cookies) is refused too.
      const anonymous = await fetch(`${server.issuer}/settings/applications/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant, csrf: sameTokenElsewhere }).toString(),
        redirect: 'manual',
      });
      expect(anonymous.status).to.equal(403);

      // A body too large for a form: the error page, not a JSON error.
      const tooLarge = await page.request.post(`${server.origin}/settings/applications/revoke`, { form: { grant, csrf: 'x', filler: 'x'.repeat(20_000) }, maxRedirects: 0 });
      expect(tooLarge.status()).to.equal(413);
      expect(tooLarge.headers()['content-type']).to.match(/^text\/html/);

      expect((await api(server, '/rest/companies', { credential: tokens.access_token })).status, 'still allowed').to.equal(200);
      await page.goto(settingsUrl());
      expect(await appCard(page, 'Forgery Target').count()).to.equal(1);

      // What the browser shows for a forged form: the error page.
      await appCard(page, 'Forgery Target').getByRole('link', { name: /^Revoke access/ }).click();
      await page.locator('input[name="csrf"]').evaluate((input: HTMLInputElement) => { input.value = 'forged'; });
      const refused = page.waitForResponse((response) => response.request().method() === 'POST');
      await page.getByRole('button', { name: 'Revoke access', exact: true }).click();
      expect((await refused).status()).to.equal(403);
      await page.getByRole('heading', { level: 1 }).waitFor();
      expect(await page.getByRole('link', { name: 'Back to settings' }).getAttribute('href'), 'the error page leads back').to.equal('/settings');
      await checkPage(page, 'settings-forged-form');
      expect((await api(server, '/rest/companies', { credential: tokens.access_token })).status, 'still allowed').to.equal(200);
    });
  });
});
