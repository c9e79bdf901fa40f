import { expect } from 'chai';
import type { Locator, Page } from 'playwright-core';

import { answerLate, browserForSuite, clickTwice, focusedElement, postsTo, sendFormCopy, signIn } from '../support/browser.ts';
import { api, memberOf, userAccessToken } from '../support/data_api.ts';
import { registerClient } from '../support/oauth.ts';
import { PHONE, checkPage } from '../support/page_audit.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';

/**
 * The settings area's account pages in Chromium against the real server: a user changing their
 * own password (the other sessions end, this one stays), and a workspace admin's members page
 * (roles changed and members removed through confirmation pages that need no JavaScript, never
 * the last admin, only for the workspace's own admins), and invitation links to it.
 */
describe('settings area: your password, and a workspace\'s members', function () {
  this.timeout(60_000);

  let server: TestServer;
  const { open } = browserForSuite({ viewport: PHONE });

  before(async function () {
    server = await startServer();
  });

  after(async function () {
    await server?.stop();
  });

  const settingsUrl = () => `${server.issuer}/settings`;
  const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { level: 1, name });
  const focusedId = async (page: Page) => (await focusedElement(page))?.id;

  /** Opens `path` of the settings area, signing in on the way (with `password`, the user's own by default). */
  async function openSignedIn(page: Page, user: SeededUser, path = '', password = user.password): Promise<void> {
    await page.goto(`${settingsUrl()}${path}`);
    await heading(page, 'Sign in').waitFor();
    await signIn(page, user, password);
    await page.waitForURL(`${settingsUrl()}${path}`);
  }

  describe('changing your password', function () {
    /** Fills the password form and submits it; resolves the status of the answer. */
    async function fillPasswordForm(page: Page, current: string, next: string, again = next): Promise<void> {
      await page.getByLabel('Current password').fill(current);
      await page.getByLabel('New password', { exact: true }).fill(next);
      await page.getByLabel('New password, again').fill(again);
    }

    async function changePassword(page: Page, current: string, next: string, again = next): Promise<number> {
      await fillPasswordForm(page, current, next, again);
      const answer = page.waitForResponse((response) => response.request().method() === 'POST');
      await page.getByRole('button', { name: 'Change password' }).click();
      return (await answer).status();
    }

    it('needs the current password, says which field to fix and puts the cursor there; then signs every other browser out and keeps this one', async function () {
      const user = await seedUser(server, [{ workspace: 'Password Ltd' }]);
      const [here, elsewhere] = [await open(), await open()];
      await openSignedIn(elsewhere, user);
      await openSignedIn(here, user);
      await here.getByRole('link', { name: 'Change your password' }).click();
      await heading(here, 'Change your password').waitFor();
      expect(await focusedId(here)).to.equal('current-password');
      await checkPage(here, 'settings-password');
      // What the new password may not be, as the rules refuse it for this user.
      expect(await here.locator('#new-password-help').innerText()).to.equal(
        'At least 8 characters, and not a commonly used password, your email or name, or the name of this service or of a workspace you belong to: a few unrelated words make a strong one.',
      );

      expect(await changePassword(here, 'not the password', 'a-new-long-password')).to.equal(400);
      expect(await here.getByRole('alert').innerText()).to.include('current password is not right');
      expect(await focusedId(here), 'the field to fix').to.equal('current-password');
      expect(await here.getByLabel('Current password').getAttribute('aria-invalid')).to.equal('true');
      await checkPage(here, 'settings-password-error');

      // The browser checks the length itself (minlength); past that check, the server refuses it too.
      for (const label of ['New password', 'New password, again']) await here.getByLabel(label, { exact: true }).evaluate((input) => input.removeAttribute('minlength'));
      expect(await changePassword(here, user.password, 'short')).to.equal(400);
      expect(await here.getByRole('alert').innerText()).to.include('at least 8 characters');
      expect(await focusedId(here)).to.equal('new-password');
      // Not "Password123": the user belongs to "Password Ltd", which is refused first.
      expect(await changePassword(here, user.password, 'Qwerty123')).to.equal(400);
      expect(await here.getByRole('alert').innerText()).to.equal('This password is one of the most commonly used ones, which attackers try first. Choose another: a few unrelated words make a strong one.');
      expect(await focusedId(here)).to.equal('new-password');
      expect(await changePassword(here, user.password, user.email)).to.equal(400);
      expect(await here.getByRole('alert').innerText()).to.include('cannot be your email address');
      expect(await changePassword(here, user.password, 'Password Ltd 2024')).to.equal(400);
      expect(await here.getByRole('alert').innerText()).to.include('cannot be the name of the service or of a workspace you belong to');

      expect(await changePassword(here, user.password, 'a-new-long-password', 'a-new-long-passwort')).to.equal(400);
      expect(await here.getByRole('alert').innerText()).to.equal('The new password and its confirmation differ: type the same new password in both fields.');
      expect(await focusedId(here)).to.equal('confirm-password');

      expect(await changePassword(here, user.password, 'a-new-long-password')).to.equal(303);
      await heading(here, 'Settings').waitFor();
      expect(await here.getByRole('status').innerText()).to.include('Password changed');

      // This browser is still signed in; the other is asked to sign in again, where the old password no longer works.
      await here.goto(settingsUrl());
      await heading(here, 'Settings').waitFor();
      await elsewhere.goto(settingsUrl());
      await heading(elsewhere, 'Sign in').waitFor();
      expect(await elsewhere.getByRole('status').innerText(), 'told why').to.equal('Your password was changed, so you were signed out here. Sign in with the new password.');
      await signIn(elsewhere, user);
      expect(await elsewhere.getByRole('alert').innerText()).to.include('not right');
      await signIn(elsewhere, user, 'a-new-long-password');
      await heading(elsewhere, 'Settings').waitFor();
    });

    it('gives this browser a new session at a password change: a copy of its session cookie made before signs no one in', async function () {
      const user = await seedUser(server, [{ workspace: 'Copied Session Ltd' }]);
      const here = await open();
      await openSignedIn(here, user, '/password');
      const copied = await here.context().cookies();
      expect(await changePassword(here, user.password, 'a-new-long-password')).to.equal(303);
      await heading(here, 'Settings').waitFor();
      await here.goto(settingsUrl());
      await heading(here, 'Settings').waitFor();
      const thief = await open();
      await thief.context().addCookies(copied);
      await thief.goto(settingsUrl());
      await heading(thief, 'Sign in').waitFor();
    });

    it('takes any password the rules allow, the longest in any script, and refuses the one you have now', async function () {
      const user = await seedUser(server, [{ workspace: 'Long Password Ltd' }]);
      const page = await open();
      await openSignedIn(page, user, '/password');
      // Eight different characters over and over (one repeated would be refused as repetitive).
      const longest = '\u754C\u4E16\u548C\u5E73\u5929\u5730\u5C71\u6C34'.repeat(128);
      expect(await changePassword(page, user.password, longest), 'a password of 1024 CJK characters').to.equal(303);
      await heading(page, 'Settings').waitFor();
      await page.goto(`${settingsUrl()}/password`);
      expect(await changePassword(page, longest, longest)).to.equal(400);
      expect(await page.getByRole('alert').innerText()).to.include('the one you have now');
      expect(await focusedId(page)).to.equal('new-password');
    });

    it('says, once wrong current passwords lock the account, that the password was not changed and for how long it cannot be checked, in words of changing it, not of signing in', async function () {
      const user = await seedUser(server, [{ workspace: 'Locked Password Ltd' }]);
      const page = await open();
      await openSignedIn(page, user, '/password');
      // The sign-in form's default: a lock after 5 consecutive failures.
      let status = 0;
      for (let attempt = 1; attempt <= 5 && status !== 429; attempt += 1) status = await changePassword(page, `wrong password ${attempt}`, 'a-new-long-password');
      expect(status, 'locked').to.equal(429);
      const alert = await page.getByRole('alert').innerText();
      expect(alert).to.match(/^Too many attempts with your password have failed, here or on the sign-in page, so checking it is paused for 1 minute\. Your password was not changed; try again after that\.$/);
      expect(alert, 'the user is changing a password, not signing in').to.not.match(/sign-in attempts|signing in/);
      expect(await focusedId(page), 'the field to fix').to.equal('current-password');
      await checkPage(page, 'settings-password-locked');
    });

    it('sends the form once when "Change password" is clicked twice, 80 ms apart: the page says the password was changed, and this browser stays signed in', async function () {
      const user = await seedUser(server, [{ workspace: 'Double Password Ltd' }]);
      const page = await open();
      await openSignedIn(page, user, '/password');
      const posts = postsTo(page, '/settings/password');
      await fillPasswordForm(page, user.password, 'a-new-long-password');
      // A server slower to answer than the two clicks are apart.
      await answerLate(page, '**/settings/password', 300);
      await clickTwice(page, page.getByRole('button', { name: 'Change password' }));
      await heading(page, 'Settings').waitFor();
      expect(await page.getByRole('status').innerText()).to.include('Password changed');
      expect(posts().length, 'the form was sent once').to.equal(1);
      await page.goto(settingsUrl());
      await heading(page, 'Settings').waitFor();
    });

    it('says the password was changed when the form comes again after its first sending changed it (its answer, with this browser\'s new session, lost), and asks to sign in with the new one', async function () {
      const user = await seedUser(server, [{ workspace: 'Lost Session Ltd' }]);
      const page = await open();
      await openSignedIn(page, user, '/password');
      await fillPasswordForm(page, user.password, 'a-new-long-password');
      const first = await sendFormCopy(page, page.locator('form'));
      expect(first.status, 'the first sending changed it').to.equal(303);

      await page.getByRole('button', { name: 'Change password' }).click();
      await heading(page, 'Your password was changed').waitFor();
      expect(await page.locator('main').innerText()).to.include('its first sending changed your password').and.to.include('Sign in again with your new password');
      await checkPage(page, 'settings-password-sent-twice');
      await page.getByRole('link', { name: 'Sign in' }).click();
      await heading(page, 'Sign in').waitFor();
      expect(await page.getByRole('status').innerText()).to.equal('Your password was changed, so you were signed out here. Sign in with the new password.');
      await signIn(page, user);
      expect(await page.getByRole('alert').innerText(), 'the old password').to.include('not right');
      await signIn(page, user, 'a-new-long-password');
      await heading(page, 'Settings').waitFor();
    });

    it('refuses a form without this session\'s token (403), and changes nothing', async function () {
      const user = await seedUser(server, [{ workspace: 'Forged Password Ltd' }]);
      const page = await open();
      await openSignedIn(page, user, '/password');
      const forged = await page.request.post(`${settingsUrl()}/password`, {
        form: { csrf: 'forged', current_password: user.password, new_password: 'a-forged-password', confirm_password: 'a-forged-password' }, maxRedirects: 0,
      });
      expect(forged.status()).to.equal(403);
      // The password is the old one still: another browser signs in with it.
      const other = await open();
      await openSignedIn(other, user);
    });
  });

  describe('a workspace\'s members', function () {
    /** The card of one member on the members page. */
    const card = (page: Page, user: SeededUser): Locator => page.getByRole('list', { name: 'Members' }).getByRole('listitem')
      .filter({ has: page.getByRole('heading', { level: 3, name: new RegExp(`^${user.name}\\b`) }) });
    const roleOn = async (page: Page, user: SeededUser) => (await card(page, user).locator('dl.facts dd').nth(1).innerText()).trim();

    it('lists each member with name, email and role, on a phone too, and leads there from the settings home', async function () {
      const admin = await seedUser(server, [{ workspace: 'Members Listed Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const [member, viewer] = [await memberOf(server, workspaceId, 'member'), await memberOf(server, workspaceId, 'viewer')];
      const page = await open();
      await openSignedIn(page, admin);
      await page.getByRole('link', { name: 'Members of Members Listed Ltd' }).click();
      await heading(page, 'Members of Members Listed Ltd').waitFor();
      for (const [user, role] of [[admin, 'admin'], [member, 'member'], [viewer, 'viewer']] as const) {
        const text = await card(page, user).innerText();
        expect(text).to.include(user.email);
        expect(await roleOn(page, user), user.name).to.equal(role);
      }
      expect(await card(page, admin).getByRole('heading').innerText()).to.include('(you)');
      await checkPage(page, 'settings-members');
    });

    /** Where the text of `element` goes onto a new line: the text of each line but the last, as laid out. */
    const lineEnds = (element: Locator) => element.evaluate((node) => {
      const ends: string[] = [];
      let text = '';
      let top: number | undefined;
      const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
      for (let current = walker.nextNode(); current; current = walker.nextNode()) {
        for (let i = 0; i < current.textContent!.length; i += 1) {
          const range = document.createRange();
          range.setStart(current, i);
          range.setEnd(current, i + 1);
          const rect = range.getBoundingClientRect();
          if (top !== undefined && rect.top > top + 1) ends.push(text);
          top = rect.top;
          text += current.textContent![i];
        }
      }
      return ends;
    });

    it('breaks a long email address after its @ and before its dots at 360 px, never mid-name, with no horizontal scroll', async function () {
      const email = `bartholomew.${Date.now().toString(36)}@research-laboratories.international.example`;
      const admin = await seedUser(server, [{ workspace: 'Long Emails Ltd' }], { email });
      const page = await open();
      await page.setViewportSize({ width: 360, height: 800 });
      await openSignedIn(page, admin, `/workspaces/${admin.workspaces[0]!.id}/members`);
      const shown = { 'the members list': card(page, admin).locator('dd').first(), 'who is signed in': page.locator('.signed-in-as strong') };
      for (const [where, element] of Object.entries(shown)) {
        expect(await element.innerText(), where).to.equal(email);
        const ends = await lineEnds(element);
        expect(ends.length, `${where}: the address takes more than one line`).to.be.at.least(1);
        // Where a line may end: after the @ or a hyphen, before a dot.
        for (const end of ends) expect(email[end.length] === '.' || /[@-]$/.test(end), `${where}: broken after "${end}" (${ends.join(' | ')})`).to.equal(true);
      }
      // In the list's narrow column, the name fits on the first line and the domain goes to the next.
      expect(await lineEnds(shown['the members list']), 'a line ends at the @').to.include(email.slice(0, email.indexOf('@') + 1));
      const width = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
      expect(width.scroll, 'no horizontal scroll at 360 px').to.be.at.most(width.client);
    });

    it('changes a role and removes a member through confirmation pages that work without JavaScript; the member\'s tokens follow', async function () {
      const admin = await seedUser(server, [{ workspace: 'Roles Changed Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const member = await memberOf(server, workspaceId, 'member');
      const client = await registerClient(server.issuer, { client_name: 'Member App' });
      const { access_token: token } = await userAccessToken(server, client, member);
      const create = () => api(server, '/rest/companies', { credential: token, json: { name: 'Made by a member' } });
      expect((await create()).status, 'a member may write').to.equal(201);

      const page = await open({ javaScriptEnabled: false });
      await openSignedIn(page, admin, `/workspaces/${workspaceId}/members`);
      await card(page, member).getByLabel(/^New role/).selectOption('viewer');
      await card(page, member).getByRole('button', { name: /^Change role/ }).click();
      await heading(page, `Make ${member.name} a viewer?`).waitFor();
      expect(await page.locator('main').innerText()).to.include('change nothing');
      await page.getByRole('link', { name: 'Keep the role as it is' }).click();
      await heading(page, 'Members of Roles Changed Ltd').waitFor();
      expect(await roleOn(page, member), 'kept').to.equal('member');

      await card(page, member).getByLabel(/^New role/).selectOption('viewer');
      await card(page, member).getByRole('button', { name: /^Change role/ }).click();
      await page.getByRole('button', { name: 'Make them a viewer' }).click();
      await page.getByRole('status').waitFor();
      expect(await page.getByRole('status').innerText()).to.include('Role changed');
      expect(await roleOn(page, member)).to.equal('viewer');
      expect((await create()).status, 'a viewer may not write, whatever the token says').to.equal(403);
      expect((await api(server, '/rest/companies', { credential: token })).status, 'but may read').to.equal(200);

      await card(page, member).getByRole('link', { name: `Remove ${member.name} from the workspace` }).click();
      await heading(page, `Remove ${member.name} from Roles Changed Ltd?`).waitFor();
      expect(page.url(), 'the confirmation page\'s address, with no bare "?"').to.equal(`${settingsUrl()}/workspaces/${workspaceId}/members/${member.id}/remove`);
      await page.getByRole('button', { name: 'Remove them from the workspace' }).click();
      await page.getByRole('status').waitFor();
      expect(await page.getByRole('status').innerText()).to.include('Member removed');
      expect(await card(page, member).count()).to.equal(0);
      const refused = await api(server, '/rest/companies', { credential: token });
      expect(refused.status, 'the grant it allowed for the workspace is revoked').to.equal(401);
    });

    it('sends a confirmation once when its button is clicked twice, 80 ms apart: the member is removed, and the page says so', async function () {
      const admin = await seedUser(server, [{ workspace: 'Double Remove Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const member = await memberOf(server, workspaceId, 'member');
      const page = await open();
      await openSignedIn(page, admin, `/workspaces/${workspaceId}/members`);
      await card(page, member).getByRole('link', { name: `Remove ${member.name} from the workspace` }).click();
      await heading(page, `Remove ${member.name} from Double Remove Ltd?`).waitFor();
      const posts = postsTo(page, `/settings/workspaces/${workspaceId}/members/${member.id}/remove`);
      // The answer waits 2 s for the change to reach every instance: the second click finds the page still there.
      await clickTwice(page, page.getByRole('button', { name: 'Remove them from the workspace' }));
      await page.getByRole('status').filter({ hasText: 'Member removed' }).waitFor();
      expect(posts().length, 'the form was sent once').to.equal(1);
      expect(await page.getByRole('alert').count(), 'no failure shown').to.equal(0);
    });

    it('ends a role change or a removal sent twice (its first answer lost) where one sending ends, not on "no such member" or "already their role"', async function () {
      const admin = await seedUser(server, [{ workspace: 'Sent Twice Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const [member, other] = [await memberOf(server, workspaceId, 'member'), await memberOf(server, workspaceId, 'member')];
      const page = await open({ javaScriptEnabled: false });
      await openSignedIn(page, admin, `/workspaces/${workspaceId}/members`);

      await card(page, member).getByLabel(/^New role/).selectOption('viewer');
      await card(page, member).getByRole('button', { name: /^Change role/ }).click();
      expect((await sendFormCopy(page, page.locator('form.confirm'))).status, 'the first sending').to.equal(303);
      await page.getByRole('button', { name: 'Make them a viewer' }).click();
      await page.getByRole('status').waitFor();
      expect(await page.getByRole('status').innerText()).to.include('Role changed');
      expect(await roleOn(page, member)).to.equal('viewer');

      await card(page, other).getByRole('link', { name: `Remove ${other.name} from the workspace` }).click();
      expect((await sendFormCopy(page, page.locator('form.confirm'))).status, 'the first sending').to.equal(303);
      const second = page.waitForResponse((response) => response.request().method() === 'POST');
      await page.getByRole('button', { name: 'Remove them from the workspace' }).click();
      expect((await second).status(), 'answered as the first was').to.equal(303);
      await page.getByRole('status').waitFor();
      expect(await page.getByRole('status').innerText()).to.include('Member removed');
      expect(await page.getByRole('alert').count(), 'no failure shown').to.equal(0);
      expect(await card(page, other).count()).to.equal(0);

      // An admin who stepped down with the first sending is not refused as no admin by the second.
      await card(page, member).getByLabel(/^New role/).selectOption('admin');
      await card(page, member).getByRole('button', { name: /^Change role/ }).click();
      await page.getByRole('button', { name: 'Make them an admin' }).click();
      await page.getByRole('status').waitFor();
      await card(page, admin).getByLabel(/^New role/).selectOption('member');
      await card(page, admin).getByRole('button', { name: /^Change role/ }).click();
      expect((await sendFormCopy(page, page.locator('form.confirm'))).status, 'the first sending').to.equal(303);
      await page.getByRole('button', { name: 'Make me a member' }).click();
      await heading(page, 'Settings').waitFor();
      expect(await page.getByRole('status').innerText()).to.equal('Your role changed: you are no longer an admin of Sent Twice Ltd.');
    });

    it('never takes away the last admin: the reason is on the page (409), and nothing changes', async function () {
      const admin = await seedUser(server, [{ workspace: 'Only Admin Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const member = await memberOf(server, workspaceId, 'member');
      const page = await open();
      await openSignedIn(page, admin, `/workspaces/${workspaceId}/members`);

      const members = `${settingsUrl()}/workspaces/${workspaceId}/members`;
      for (const path of [`/${admin.id}/role?role=member`, `/${admin.id}/remove`]) {
        const answer = await page.goto(`${members}${path}`);
        expect(answer!.status(), path).to.equal(409);
        expect(await page.getByRole('alert').innerText(), 'said to the admin who asked').to.equal('You are the last admin of Only Admin Ltd: make another member an admin first.');
      }
      await checkPage(page, 'settings-members-last-admin');

      // A form posted all the same, with this session's token (from another confirmation page): refused the same way.
      await page.goto(`${members}/${member.id}/remove`);
      const csrf = await page.locator('input[name="csrf"]').inputValue();
      for (const [path, form] of [['role', { role: 'viewer' }], ['remove', {}]] as const) {
        const posted = await page.request.post(`${members}/${admin.id}/${path}`, { form: { csrf, ...form }, maxRedirects: 0 });
        expect(posted.status(), path).to.equal(409);
        expect(await posted.text()).to.include('You are the last admin of Only Admin Ltd: make another member an admin first.');
      }
      // The role a member has already, posted: nothing to change, and said so, as the confirmation link says it.
      const same = await page.request.post(`${members}/${member.id}/role`, { form: { csrf, role: 'member' }, maxRedirects: 0 });
      expect([same.status(), new URL(same.headers().location ?? '', members).href], 'the same role posted').to.deep.equal([303, `${members}?done=role-unchanged`]);
      await page.goto(members);
      expect(await roleOn(page, admin)).to.equal('admin');

      // With a second admin, the first may step down, and is taken back to the settings home.
      await card(page, member).getByLabel(/^New role/).selectOption('admin');
      await card(page, member).getByRole('button', { name: /^Change role/ }).click();
      await page.getByRole('button', { name: 'Make them an admin' }).click();
      await page.getByRole('status').waitFor();
      await card(page, admin).getByLabel(/^New role/).selectOption('member');
      await card(page, admin).getByRole('button', { name: /^Change role/ }).click();
      await heading(page, 'Make yourself a member?').waitFor();
      expect(await page.locator('main').innerText()).to.include('You will no longer be able to manage this workspace')
        .and.to.include('The applications you allowed keep working');
      await page.getByRole('button', { name: 'Make me a member' }).click();
      await heading(page, 'Settings').waitFor();
      expect(await page.getByRole('status').innerText()).to.equal('Your role changed: you are no longer an admin of Only Admin Ltd.');
      expect((await page.goto(members))!.status()).to.equal(403);
    });

    it('is only for the workspace\'s admins: a member or viewer gets 403, anyone else 404, and an admin of another workspace changes nothing here', async function () {
      const owner = await seedUser(server, [{ workspace: 'Guarded Ltd' }]);
      const workspaceId = owner.workspaces[0]!.id;
      const target = await memberOf(server, workspaceId, 'member');
      const members = `${settingsUrl()}/workspaces/${workspaceId}/members`;
      const stranger = await seedUser(server, [{ workspace: 'Stranger Ltd' }]);
      const strangersMembers = `${settingsUrl()}/workspaces/${stranger.workspaces[0]!.id}/members`;

      for (const [who, status] of [[await memberOf(server, workspaceId, 'viewer'), 403], [target, 403], [stranger, 404]] as const) {
        const page = await open();
        await openSignedIn(page, who);
        // A token of the user's own session: from the password page.
        await page.goto(`${settingsUrl()}/password`);
        const csrf = await page.locator('input[name="csrf"]').inputValue();
        for (const path of ['', `/${target.id}/role?role=viewer`, `/${target.id}/remove`]) {
          expect((await page.goto(`${members}${path}`))!.status(), `${who.email}: GET members${path}`).to.equal(status);
        }
        for (const [path, form] of [['role', { role: 'admin' }], ['remove', {}]] as const) {
          const posted = await page.request.post(`${members}/${who.id === target.id ? owner.id : target.id}/${path}`, { form: { csrf, ...form }, maxRedirects: 0 });
          expect(posted.status(), `${who.email}: POST ${path}`).to.equal(status);
        }
      }

      // The stranger, admin of their own workspace, names a member of this one through it: no such member there.
      const page = await open();
      await openSignedIn(page, stranger, '/password');
      const csrf = await page.locator('input[name="csrf"]').inputValue();
      expect((await page.goto(`${strangersMembers}/${target.id}/remove`))!.status()).to.equal(404);
      for (const [path, form] of [['role', { role: 'viewer' }], ['remove', {}]] as const) {
        const posted = await page.request.post(`${strangersMembers}/${target.id}/${path}`, { form: { csrf, ...form }, maxRedirects: 0 });
        expect(posted.status(), `POST ${path} through another workspace`).to.equal(404);
      }
      // No token: refused before anything is looked at.
      const ownerPage = await open();
      await openSignedIn(ownerPage, owner, `/workspaces/${workspaceId}/members`);
      expect((await ownerPage.request.post(`${members}/${target.id}/remove`, { form: {}, maxRedirects: 0 })).status()).to.equal(403);
      await ownerPage.reload();
      expect(await roleOn(ownerPage, target), 'nothing changed').to.equal('member');
    });

    it('invites someone by a link shown once: another user opens it, signs in, accepts and is a member; the link then works no more', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invited Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const invitee = await seedUser(server, []);
      const page = await open();
      await openSignedIn(page, admin, `/workspaces/${workspaceId}/members`);
      expect(await page.getByText('No invitation is pending.').count()).to.equal(1);
      expect(await page.getByLabel('Role', { exact: true }).inputValue(), 'the role offered first').to.equal('member');
      await page.getByRole('button', { name: 'Create invitation link' }).click();
      await heading(page, 'Invitation link created').waitFor();
      const link = await page.getByLabel('The link to join Invited Ltd as a member').inputValue();
      expect(link).to.match(new RegExp(`^${settingsUrl()}/invitations/[A-Za-z0-9_-]{43}$`));
      expect(await page.locator('main').innerText()).to.include('only time it is shown').and.to.include('works once, for someone who has an account on this server');
      await page.getByRole('button', { name: 'Copy link' }).waitFor({ state: 'visible' });
      await checkPage(page, 'settings-invitation-created');
      const shortId = await page.locator('dl.facts code').innerText();
      expect(shortId, 'the link\'s short id').to.match(/^[A-Za-z0-9_-]{6}$/);
      await page.getByRole('link', { name: 'Done: back to the members of Invited Ltd' }).click();
      const pending = page.getByRole('list', { name: 'Pending invitations' }).getByRole('listitem');
      expect(await pending.count()).to.equal(1);
      expect(await pending.innerText()).to.include('To join as member').and.to.include(admin.email).and.to.include(shortId);
      expect(await page.locator('main').innerText(), 'the link is not shown again').to.not.include(link);

      // A second one, alike but for its short id, cancelled by the Cancel that names it: its page's URL ends in /cancel.
      await page.getByRole('button', { name: 'Create invitation link' }).click();
      const otherId = await page.locator('dl.facts code').innerText();
      await page.getByRole('link', { name: 'Done: back to the members of Invited Ltd' }).click();
      await page.getByRole('link', { name: new RegExp(`^Cancel the invitation ${otherId} to join as member`) }).click();
      await page.waitForURL(/\/invitations\/inv_[A-Za-z0-9_-]{16}\/cancel$/);
      await page.getByRole('button', { name: 'Cancel the invitation' }).click();
      await page.getByText('Invitation cancelled.').waitFor();
      expect(await pending.count(), 'the other one is left').to.equal(1);
      expect(await pending.innerText()).to.include(shortId);

      // Another browser, not signed in: the link leads through the sign-in, and back to itself.
      const theirs = await open();
      await theirs.goto(link);
      await heading(theirs, 'Sign in').waitFor();
      await signIn(theirs, invitee);
      await theirs.waitForURL(link);
      await heading(theirs, `${admin.email} invited you to join Invited Ltd as a member`).waitFor();
      await checkPage(theirs, 'settings-invitation');
      await theirs.getByRole('button', { name: 'Accept the invitation' }).click();
      await heading(theirs, 'Settings').waitFor();
      expect(await theirs.getByRole('status').innerText()).to.include('You joined Invited Ltd');
      expect(await theirs.getByRole('heading', { level: 3, name: /^Invited Ltd/ }).innerText()).to.include('(member)');

      await page.reload();
      expect(await roleOn(page, invitee), 'listed as a member').to.equal('member');
      expect(await pending.count(), 'used up').to.equal(0);

      // Opened again by whoever used it: where it took them, not that it is used.
      const again = await theirs.goto(link);
      expect(again!.status()).to.equal(200);
      await heading(theirs, 'You joined Invited Ltd with this invitation').waitFor();
      await theirs.getByRole('link', { name: 'Go to your settings, where it is under Your workspaces' }).click();
      await heading(theirs, 'Settings').waitFor();
      // By anyone else: used.
      const latecomer = await open();
      await latecomer.goto(link);
      await signIn(latecomer, await seedUser(server, []));
      await heading(latecomer, 'This invitation is not valid').waitFor();
      expect(await latecomer.locator('main').innerText()).to.include('This invitation link is not valid any more: it expired, was used or was cancelled. Ask the workspace admin for a new one.');
      expect(await latecomer.getByRole('link', { name: 'Back to settings' }).count()).to.equal(1);
    });
  });
});
