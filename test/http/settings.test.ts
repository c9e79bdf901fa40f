import { hash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { openStore, sqliteFile } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';
import { loadConfig } from '../../config/index.ts';
import { Accounts } from '../../src/accounts/accounts.ts';
import { createService } from '../../src/http/app.ts';
import { loadKeyRing } from '../../src/keys/key_encryption.ts';
import { loadKeys } from '../../src/keys/keys.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { RevocationList } from '../../src/tokens/revocation_list.ts';
import { INVITATION_MODEL, MAX_PENDING_INVITATIONS, invitationsOver, WorkspaceInvitations } from '../../src/settings/invitations.ts';
import { memberOf } from '../support/data_api.ts';
import { codeRequest, exchangeCode, postCredentials, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { freePort, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize, field, formAction } from '../support/user_agent.ts';

/**
 * What the settings area keeps, seen in the store the server writes to (its SQLite file), through
 * real HTTP: a grant's last use written at most once a minute and removed with the grant, the
 * settings area's own sign-in leaving no code behind, and invitation links (a digest kept, used once).
 */
describe('settings area: what it stores', function () {
  this.timeout(30_000);

  let server: TestServer;

  before(async function () {
    server = await startServer();
  });

  after(async function () {
    await server?.stop();
  });

  /** Reads the server's store with a connection of its own (the file is shared). */
  async function inStore<T>(read: (store: Store) => Promise<T>): Promise<T> {
    const store = openStore(server.store);
    try {
      return await read(store);
    } finally {
      await store.close();
    }
  }

  /** A new client the user authorizes (login and consent over HTTP), and the tokens its code buys. */
  async function authorizedClient(user: SeededUser): Promise<{ client: RegisteredClient; refreshToken: string }> {
    const client = await registerClient(server.issuer, { client_name: 'Stored App' });
    const { url, verifier } = codeRequest(server.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    const response = await exchangeCode(server.issuer, client, callback.searchParams.get('code')!, verifier);
    expect(response.status).to.equal(200);
    return { client, refreshToken: ((await response.json()) as { refresh_token: string }).refresh_token };
  }

  it('records a grant\'s last use at most once a minute', async function () {
    const user = await seedUser(server, [{ workspace: 'Stored Ltd' }]);
    const { client, refreshToken } = await authorizedClient(user);
    const grants = await inStore((store) => store.model('Grant').listBy(user.id));
    expect(grants.map(({ payload }) => payload.clientId)).to.deep.equal([client.client_id]);
    const grantId = grants[0]!.id;
    const firstUse = await inStore((store) => store.model('GrantActivity').find(grantId));
    expect(firstUse?.lastUsedAt, 'the code exchange is a use').to.be.a('number');

    // A refresh a second later, within the minute: nothing written.
    await sleep(1100);
    const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });
    expect(refreshed.status).to.equal(200);
    expect(await inStore((store) => store.model('GrantActivity').find(grantId))).to.deep.equal(firstUse);
  });

  it('removes a revoked grant\'s last use, workspace and place in the user\'s list with the grant', async function () {
    const user = await seedUser(server, [{ workspace: 'Cleaned Ltd' }]);
    const { client, refreshToken } = await authorizedClient(user);
    const [grant] = await inStore((store) => store.model('Grant').listBy(user.id));
    expect(await inStore((store) => store.model('GrantActivity').find(grant!.id))).to.not.equal(undefined);

    // RFC 7009: revoking the refresh token revokes its grant.
    const revoked = await fetch(`${server.issuer}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: refreshToken, ...postCredentials(client) }).toString(),
    });
    expect(revoked.status).to.equal(200);
    expect(await inStore((store) => store.model('Grant').listBy(user.id))).to.deep.equal([]);
    expect(await inStore((store) => store.model('GrantActivity').find(grant!.id))).to.equal(undefined);
    expect(await inStore((store) => store.model('GrantWorkspace').find(grant!.id))).to.equal(undefined);
  });

  /** Signs `user` in to the settings area: the login page, its form posted, then the redirects back; returns the browser and where it landed. */
  async function signInToSettings(user: SeededUser): Promise<{ agent: UserAgent; landed: string }> {
    const agent = new UserAgent();
    const login = await agent.follow(`${server.issuer}/settings`, server.origin);
    const html = await login.response.text();
    const action = /<form method="post" action="([^"]+)"/.exec(html)![1]!;
    const csrf = /name="csrf" value="([^"]*)"/.exec(html)![1]!;
    const posted = await agent.request(new URL(action, server.origin).href, { form: { csrf, email: user.email, password: user.password } });
    const landed = await agent.follow(new URL(posted.headers.get('location')!, server.origin).href, server.origin);
    return { agent, landed: landed.url };
  }

  it('keeps a settings form open in one tab working while the browser authorizes an application in another (the engine renews its session id then)', async function () {
    const user = await seedUser(server, [{ workspace: 'Two Tabs Ltd' }]);
    const { agent } = await signInToSettings(user);
    const workspacePage = await (await agent.request(`${server.issuer}/settings/workspaces/${user.workspaces[0]!.id}`)).text();
    const form = /<form class="create-key" method="post" action="([^"]+)">[\s\S]*?name="csrf" value="([^"]*)"[\s\S]*?name="form_id" value="([^"]*)"/.exec(workspacePage)!;

    const client = await registerClient(server.issuer, { client_name: 'Other Tab App' });
    const callback = await authorize(agent, codeRequest(server.issuer, client.client_id).url, server.origin, { email: user.email, password: user.password });
    expect(callback.searchParams.get('code'), 'the application was allowed in the same browser').to.be.a('string');

    const created = await agent.request(new URL(form[1]!, server.origin).href, { form: { csrf: form[2]!, form_id: form[3]!, name: 'made after the other tab', expires_in: '30d' } });
    expect(created.status, (await created.clone().text()).slice(0, 300)).to.equal(200);
    expect(await created.text()).to.include('made after the other tab');
  });

  it('refuses on a workspace\'s page a key name an active key of the workspace has, read as a person reads it, at the name field; a revoked key\'s name may be used again', async function () {
    const user = await seedUser(server, [{ workspace: 'Key Names Page Ltd' }]);
    const workspaceId = user.workspaces[0]!.id;
    const { agent } = await signInToSettings(user);
    const create = async (name: string) => {
      const page = await (await agent.request(`${server.issuer}/settings/workspaces/${workspaceId}`)).text();
      const [, action, csrf, formId] = /<form class="create-key" method="post" action="([^"]+)">[\s\S]*?name="csrf" value="([^"]*)"[\s\S]*?name="form_id" value="([^"]*)"/.exec(page)!;
      const answer = await agent.request(new URL(action!, server.origin).href, { form: { csrf: csrf!, form_id: formId!, name, expires_in: '30d' } });
      return { status: answer.status, html: await answer.text() };
    };
    expect((await create('Nightly export')).status).to.equal(200);

    const again = await create('  NIGHTLY EXPORT ');
    expect(again.status).to.equal(400);
    expect(/<p class="error" role="alert" id="create-error">([^<]*)<\/p>/.exec(again.html)?.[1]?.replaceAll('&#34;', '"'))
      .to.equal('The key was not created: the workspace already has an active key named "Nightly export": give this one another name, or revoke that one first.');
    expect(again.html, 'the name kept, its field the one to fix').to.match(/<input id="key-name"[^>]*value="  NIGHTLY EXPORT "[^>]*autofocus aria-invalid="true">/);

    const [listed] = JSON.parse((await server.admin(['api-key', 'list', '--workspace', workspaceId, '--json'])).stdout) as Array<{ id: string }>;
    expect((await server.admin(['api-key', 'revoke', listed!.id])).code).to.equal(0);
    expect((await create('nightly export')).status, 'the revoked key\'s name').to.equal(200);
  });

  it('says on a workspace\'s page whether the admin reading it is its only admin or one of several', async function () {
    const user = await seedUser(server, [{ workspace: 'Admins Counted Ltd' }]);
    const { agent } = await signInToSettings(user);
    const workspacePage = async () => (await agent.request(`${server.issuer}/settings/workspaces/${user.workspaces[0]!.id}`)).text();
    expect(await workspacePage()).to.include('You are its only admin.').and.not.include('one of its admins');
    await memberOf(server, user.workspaces[0]!.id, 'admin');
    expect(await workspacePage()).to.include('You are one of its admins.');
  });

  it('names the workspace an admin left in the banner that says so, and none that an address made up names', async function () {
    const user = await seedUser(server, [{ workspace: 'Left Behind Ltd' }]);
    const workspaceId = user.workspaces[0]!.id;
    await memberOf(server, workspaceId, 'admin');
    const { agent } = await signInToSettings(user);
    const confirmation = await (await agent.request(`${server.issuer}/settings/workspaces/${workspaceId}/members/${user.id}/remove`)).text();
    const [, action, csrf, formId] = /<form class="confirm" method="post" action="([^"]+)">[\s\S]*?name="csrf" value="([^"]*)"[\s\S]*?name="form_id" value="([^"]*)"/.exec(confirmation)!;
    const removed = await agent.request(new URL(action!, server.origin).href, { form: { csrf: csrf!, form_id: formId! } });
    expect(removed.status).to.equal(303);
    const banner = async (location: string) => /<p class="done" role="status">([^<]*)<\/p>/.exec(await (await agent.request(new URL(location, server.origin).href)).text())?.[1];
    const location = removed.headers.get('location')!;
    expect(await banner(location)).to.equal('You left Left Behind Ltd. The applications you allowed for it lost their access.');

    // Another workspace's id in the same address, or no seal: the sentence names none.
    const other = await seedUser(server, [{ workspace: 'Never Joined Ltd' }]);
    const elsewhere = location.replace(encodeURIComponent(workspaceId), encodeURIComponent(other.workspaces[0]!.id));
    expect(elsewhere).to.not.equal(location);
    for (const made of [elsewhere, `/settings?done=left-workspace&workspace=${other.workspaces[0]!.id}`]) {
      expect(await banner(made), made).to.equal('You left the workspace. The applications you allowed for it lost their access.');
    }
  });

  it('says of a settings sign-in whose interaction is gone that it took too long, and leads back to the settings area, not to an application', async function () {
    const login = await new UserAgent().follow(`${server.issuer}/settings`, server.origin);
    const html = await login.response.text();
    const action = new URL(/<form method="post" action="([^"]+)"/.exec(html)![1]!, server.origin).href;
    const csrf = /name="csrf" value="([^"]*)"/.exec(html)![1]!;
    const from = /name="from" value="([^"]*)"/.exec(html)?.[1];
    expect(from, 'the settings sign-in form says what it is for').to.equal('settings');
    // Sent by a browser that holds no interaction cookie, as one whose interaction expired.
    const expired = await new UserAgent().request(action, { form: { csrf, from: from!, email: 'who@example.com', password: 'whatever' } });
    expect(expired.status).to.equal(400);
    const page = await expired.text();
    expect(page).to.include('Your sign-in took too long. Start again from Settings.').and.include('<a href="/settings">Back to settings</a>');
    expect(page).to.not.include('go back to the application');
  });

  it('tells a browser whose session ended, at the settings sign-in, that it was signed out; a browser never signed in is told nothing', async function () {
    const notice = async (agent: UserAgent, url = `${server.issuer}/settings`) => /<p class="notice" role="status">([^<]*)<\/p>/.exec(await (await agent.follow(url, server.origin)).response.text())?.[1];
    expect(await notice(new UserAgent()), 'never signed in').to.equal(undefined);

    const user = await seedUser(server, [{ workspace: 'Session Ended Ltd' }]);
    const { agent } = await signInToSettings(user);
    // Its session ends (as an operator's password reset or a user deletion ends it), its cookie stays.
    await inStore(async (store) => {
      for (const { id } of await store.model('Session').listBy(user.id)) await store.model('Session').destroy(id);
    });
    expect(await notice(agent)).to.equal('You were signed out (your session ended or your password was changed). Sign in again.');
    const client = await registerClient(server.issuer, { client_name: 'Not Settings' });
    expect(await notice(agent, codeRequest(server.issuer, client.client_id).url), 'an application\'s sign-in says nothing of it').to.equal(undefined);
  });

  it('signing in to the settings area leaves no authorization code behind', async function () {
    const user = await seedUser(server, [{ workspace: 'No Code Ltd' }]);
    const { agent, landed } = await signInToSettings(user);
    expect(landed).to.equal(`${server.issuer}/settings`);
    const settings = await agent.request(`${server.issuer}/settings`);
    expect(settings.status).to.equal(200);
    expect((await settings.text()).replaceAll('<wbr>', ''), 'the address may break after its @ and before its dots').to.include(`Signed in as <strong>${user.email}</strong>`);
    const codes = await inStore((store) => store.model('AuthorizationCode').list());
    expect(codes.filter(({ payload }) => payload.clientId === 'settings')).to.deep.equal([]);
  });

  it('answers a path no page serves with an error page that links back, a wrong method with 405, and a reload of a new key\'s page with the workspace page', async function () {
    for (const [method, path, status, back] of [
      ['GET', '/settings/applications', 404, '/settings'],
      ['PUT', '/settings', 405, '/settings'],
      ['GET', '/interaction/unknown/page', 404, '/'],
    ] as const) {
      const response = await fetch(`${server.issuer}${path}`, { method, redirect: 'manual' });
      expect(response.status, `${method} ${path}`).to.equal(status);
      expect(response.headers.get('content-type')).to.match(/^text\/html/);
      if (status === 405) expect(response.headers.get('allow')).to.contain('GET');
      expect(await response.text(), `${method} ${path}`).to.contain(`<a href="${back}">`);
    }
    const reload = await fetch(`${server.issuer}/settings/workspaces/ws_1/api-keys`, { redirect: 'manual' });
    expect(reload.status).to.equal(303);
    expect(reload.headers.get('location')).to.equal('/settings/workspaces/ws_1');
  });

  it('the settings area\'s own client is never shown a consent page and gets no code for more than signing in', async function () {
    const { agent, landed } = await signInToSettings(await seedUser(server, [{ workspace: 'Settings Client Ltd' }]));
    expect(landed).to.equal(`${server.issuer}/settings`);

    const callback = `${server.issuer}/settings/callback`;
    /** Follows the signed-in browser's redirects until one is for the settings callback, which is not followed. */
    async function untilCallback(overrides: Record<string, string>): Promise<URL> {
      let url = codeRequest(server.issuer, 'settings', { redirect_uri: callback, ...overrides }).url;
      for (let hops = 0; hops < 6; hops += 1) {
        const response = await agent.request(url);
        const location = response.headers.get('location');
        expect(location, `${response.status} at ${url}: ${(await response.text()).slice(0, 300)}`).to.be.a('string');
        url = new URL(location!, url).href;
        if (url.startsWith(callback)) return new URL(url);
      }
      throw new Error(`never reached ${callback}`);
    }
    const moreScope = await untilCallback({ scope: 'openid api profile' });
    expect(moreScope.searchParams.get('error')).to.equal('invalid_scope');
    const askedConsent = await untilCallback({ scope: 'openid', prompt: 'consent' });
    expect(askedConsent.searchParams.get('error')).to.equal('access_denied');
    const signIn = await untilCallback({ scope: 'openid' });
    expect(signIn.searchParams.get('code'), 'signing in still works').to.be.a('string');
  });

  describe('invitation links', function () {
    const INVALID = 'This invitation link is not valid any more: it expired, was used or was cancelled. Ask the workspace admin for a new one.';
    const membersUrl = (workspaceId: string) => `${server.issuer}/settings/workspaces/${workspaceId}/members`;

    /** A token of the agent's session, from the password page. */
    async function sessionToken(agent: UserAgent): Promise<string> {
      return field(await (await agent.request(`${server.issuer}/settings/password`)).text(), 'csrf')!;
    }

    /** The members page's invitation form sent by a signed-in admin: the answer, and the link it shows. */
    async function invite(agent: UserAgent, workspaceId: string, role = 'member'): Promise<{ response: Response; html: string; link: string | undefined; form: Record<string, string> }> {
      const page = await (await agent.request(membersUrl(workspaceId))).text();
      const [, action, csrf, formId] = /<form class="create-invitation" method="post" action="([^"]+)">[\s\S]*?name="csrf" value="([^"]*)"[\s\S]*?name="form_id" value="([^"]*)"/.exec(page)!;
      const form = { csrf: csrf!, form_id: formId!, role };
      const response = await agent.request(new URL(action!, server.origin).href, { form });
      const html = await response.clone().text();
      return { response, html, link: /<textarea id="new-link"[^>]*>([^<]+)<\/textarea>/.exec(html)?.[1], form };
    }

    /** Opens the link signed in, and sends its accept form as it is shown; the page, and the answer to the form. */
    async function accept(agent: UserAgent, link: string): Promise<{ page: Response; html: string; answer?: Response }> {
      const page = await agent.request(link);
      const html = await page.clone().text();
      const [csrf, formId] = [field(html, 'csrf'), field(html, 'form_id')];
      if (!csrf || !formId) return { page, html };
      return { page, html, answer: await agent.request(link, { form: { csrf, form_id: formId } }) };
    }

    const roleIn = (userId: string, workspaceId: string) => inStore((store) => new Accounts(store.accounts).roleIn(userId, workspaceId));

    /** Every byte the server's SQLite store has on disk: the database and its write-ahead log. */
    async function storeBytes(): Promise<string> {
      const file = sqliteFile(server.store)!;
      const parts = await Promise.all([file, `${file}-wal`].map((path) => readFile(path).catch(() => Buffer.alloc(0))));
      return Buffer.concat(parts).toString('latin1');
    }

    it('is for the workspace\'s admins only: a member gets 403 and someone of another workspace 404, and no invitation is made', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Guarded Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const stranger = await seedUser(server, [{ workspace: 'Invite Stranger Ltd' }]);
      for (const [who, status] of [[await memberOf(server, workspaceId, 'member'), 403], [stranger, 404]] as const) {
        const { agent } = await signInToSettings(who);
        const csrf = await sessionToken(agent);
        const posted = await agent.request(`${server.issuer}/settings/workspaces/${workspaceId}/invitations`, { form: { csrf, form_id: 'A'.repeat(22), role: 'admin' } });
        expect(posted.status, who.email).to.equal(status);
      }
      expect(await inStore((store) => store.model(INVITATION_MODEL).listBy(workspaceId))).to.deep.equal([]);
    });

    it('keeps only the digest of a link\'s secret, logs no secret, makes one invitation per form shown, and lets the link add its member once', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Digest Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const { agent } = await signInToSettings(admin);
      const { response, link, form } = await invite(agent, workspaceId, 'viewer');
      expect(response.status).to.equal(200);
      const secret = new URL(link!).pathname.split('/').pop()!;
      expect(secret).to.match(/^[A-Za-z0-9_-]{43}$/);

      const stored = await inStore((store) => store.model(INVITATION_MODEL).listBy(workspaceId));
      expect(stored.map(({ id }) => id), 'stored under the secret\'s SHA-256').to.deep.equal([hash('sha256', secret, 'base64url')]);
      expect(stored[0]!.payload).to.include({ workspaceId, role: 'viewer', invitedBy: admin.id });
      expect(await storeBytes(), 'the secret is nowhere in the store').to.not.include(secret);

      const again = await agent.request(new URL(`/settings/workspaces/${workspaceId}/invitations`, server.origin).href, { form });
      expect(again.status, 'the same form sent again').to.equal(409);
      expect(await again.text()).to.include('its first sending created an invitation: no second one was created');
      const reload = await agent.request(`${server.issuer}/settings/workspaces/${workspaceId}/invitations`);
      expect([reload.status, reload.headers.get('location')], 'the link\'s page opened again').to.deep.equal([303, `/settings/workspaces/${workspaceId}/members`]);
      expect(await inStore((store) => store.model(INVITATION_MODEL).listBy(workspaceId))).to.have.length(1);

      const invitee = await seedUser(server, []);
      const { agent: theirs } = await signInToSettings(invitee);
      const { html, answer } = await accept(theirs, link!);
      expect(html).to.include(`${admin.email} invited you to join Invite Digest Ltd as a viewer`);
      expect(answer!.status).to.equal(303);
      const joined = answer!.headers.get('location')!;
      expect(joined).to.match(new RegExp(`^/settings\\?done=invitation-accepted&workspace=${encodeURIComponent(workspaceId)}&seal=[A-Za-z0-9_-]+$`));
      const banner = /<p class="done" role="status">([^<]*)<\/p>/.exec(await (await theirs.request(new URL(joined, server.origin).href)).text())?.[1];
      expect(banner, 'the banner names the workspace joined').to.equal('You joined Invite Digest Ltd: it is under Your workspaces below.');
      expect(await roleIn(invitee.id, workspaceId)).to.equal('viewer');
      expect(await inStore((store) => store.model(INVITATION_MODEL).listBy(workspaceId)), 'used up').to.deep.equal([]);

      const later = await seedUser(server, []);
      const { agent: latecomer } = await signInToSettings(later);
      const used = await latecomer.request(link!);
      expect(used.status).to.equal(410);
      expect(await used.text()).to.include(INVALID);

      // Whoever used it, opening it again (the back button, a second click), is told where it took them.
      const reopened = await theirs.request(link!);
      expect(reopened.status, 'the accepter opens the link again').to.equal(200);
      const joinedPage = await reopened.text();
      expect(joinedPage).to.include('You joined Invite Digest Ltd with this invitation').and.to.include('<a href="/settings">').and.to.not.include(INVALID);
      const resent = await theirs.request(link!, { form: { csrf: await sessionToken(theirs), form_id: 'D'.repeat(22) } });
      expect(resent.status, 'the accepter sends a new accept form').to.equal(200);
      expect(await resent.text()).to.include('You joined Invite Digest Ltd with this invitation');
      expect(await storeBytes(), 'what is kept of its use holds no link').to.not.include(secret);

      await sleep(100);
      const logs = server.logs();
      const lines = logs.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.find(({ message }) => message === 'invitation created'), 'created').to.include({ workspace_id: workspaceId, role: 'viewer', invited_by: admin.id });
      expect(lines.find(({ message }) => message === 'invitation accepted'), 'accepted').to.include({ workspace_id: workspaceId, user_id: invitee.id, invited_by: admin.id });
      expect(logs, 'no log line holds the secret').to.not.include(secret);
    });

    it('adds one member when two people accept the same link at once: the other is told it is not valid any more', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Race Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const { link } = await invite((await signInToSettings(admin)).agent, workspaceId);
      const people = [await seedUser(server, []), await seedUser(server, [])];
      const forms = await Promise.all(people.map(async (person) => {
        const { agent } = await signInToSettings(person);
        const html = await (await agent.request(link!)).text();
        return { agent, form: { csrf: field(html, 'csrf')!, form_id: field(html, 'form_id')! } };
      }));
      const answers = await Promise.all(forms.map(({ agent, form }) => agent.request(link!, { form })));
      expect(answers.map(({ status }) => status).sort()).to.deep.equal([303, 410]);
      const roles = await Promise.all(people.map((person) => roleIn(person.id, workspaceId)));
      expect(roles.filter((role) => role === 'member'), 'one membership').to.have.length(1);
    });

    it('sends a link with a slash after it to the link itself (308), which the sign-in then returns to', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Slash Ltd' }]);
      const { link } = await invite((await signInToSettings(admin)).agent, admin.workspaces[0]!.id);
      const path = new URL(link!).pathname;
      const slashed = await fetch(`${link!}/?next=elsewhere`, { redirect: 'manual' });
      expect([slashed.status, slashed.headers.get('location')]).to.deep.equal([308, path]);
      const signedOut = new UserAgent();
      const login = await signedOut.follow(link!, server.origin);
      expect(login.response.status, 'the canonical link leads to the sign-in').to.equal(200);
    });

    it('tells pending invitations apart: each card and Cancel button names its short id, which the link\'s page shows too; the cancel page\'s URL ends in /cancel', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Twins Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const { agent } = await signInToSettings(admin);
      const shortIds: string[] = [];
      for (const _ of [1, 2]) {
        const { html } = await invite(agent, workspaceId);
        const shown = /<dt>Invitation<\/dt>\s*<dd><code>([A-Za-z0-9_-]{6})<\/code>/.exec(html)?.[1];
        expect(shown, 'the link\'s page shows its short id').to.be.a('string');
        shortIds.push(shown!);
      }
      const stored = await inStore((store) => store.model(INVITATION_MODEL).listBy(workspaceId));
      expect(shortIds.slice().sort()).to.deep.equal(stored.map(({ payload }) => String(payload.id).slice(-6)).sort());
      const page = await (await agent.request(membersUrl(workspaceId))).text();
      const names = [...page.matchAll(/>Cancel<span class="visually-hidden">([^<]+)<\/span>/g)].map(([, name]) => name);
      expect(names).to.have.length(2);
      expect(new Set(names).size, 'two Cancel buttons, two names').to.equal(2);
      for (const shortId of shortIds) expect(names.filter((name) => name!.includes(` the invitation ${shortId} to join as member`)), shortId).to.have.length(1);
      const hrefs = [...page.matchAll(/<a class="button-link danger" href="([^"]+)">Cancel</g)].map(([, href]) => href!);
      expect(hrefs.every((href) => href.endsWith('/cancel')), 'no bare "?"').to.equal(true);
      const first = hrefs.find((href) => href.endsWith(`${shortIds[0]}/cancel`));
      expect(first, 'the first invitation\'s Cancel').to.be.a('string');
      const confirmation = await (await agent.request(new URL(first!, server.origin).href)).text();
      expect(confirmation).to.include(`<dt>Invitation</dt>\n  <dd>${shortIds[0]}</dd>`);
    });

    it('cancels an invitation after asking: its link is refused (410) and the list no longer shows it', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Cancelled Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const { agent } = await signInToSettings(admin);
      const { link } = await invite(agent, workspaceId);
      const page = await (await agent.request(membersUrl(workspaceId))).text();
      const cancelAction = /<a class="button-link danger" href="([^"]+\/cancel)">/.exec(page)![1]!;
      const confirmation = await agent.request(new URL(cancelAction, server.origin).href);
      const asked = await confirmation.text();
      expect(confirmation.status).to.equal(200);
      expect(asked).to.include('Cancel this invitation to Invite Cancelled Ltd?');
      const cancelled = await agent.request(new URL(cancelAction, server.origin).href, { form: { csrf: field(asked, 'csrf')!, form_id: field(asked, 'form_id')! } });
      expect([cancelled.status, cancelled.headers.get('location')]).to.deep.equal([303, `/settings/workspaces/${workspaceId}/members?done=invitation-cancelled`]);
      const after = await (await agent.request(new URL(cancelled.headers.get('location')!, server.origin).href)).text();
      expect(after).to.include('Invitation cancelled. Its link no longer works.').and.to.include('No invitation is pending.');
      expect((await agent.request(new URL(cancelAction, server.origin).href)).status, 'nothing left to cancel').to.equal(404);

      const { agent: theirs } = await signInToSettings(await seedUser(server, []));
      const refused = await theirs.request(link!);
      expect(refused.status).to.equal(410);
      expect(await refused.text()).to.include(INVALID);
      await sleep(100);
      expect(server.logs()).to.match(/"message":"invitation cancelled"/);
    });

    it('refuses an expired link, and one whose admin was demoted since; tells a member they are one already, and keeps the link for someone else', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Refused Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const demoted = await memberOf(server, workspaceId, 'admin');
      // Made 8 days ago (the module on the server's store, with its clock moved back): expired a day ago.
      const made = (days: number, by: string) => inStore(async (store) => {
        const invitations = new WorkspaceInvitations({
          invitations: store.model(INVITATION_MODEL), marks: store.model('ReplayDetection'), accounts: new Accounts(store.accounts), clock: () => Date.now() - days * 86_400_000,
        });
        const created = await invitations.create(workspaceId, 'member', by);
        if ('refused' in created) throw new Error(created.refused.error);
        return `${server.issuer}/settings/invitations/${created.secret}`;
      });
      const [expired, byDemoted, current] = [await made(8, admin.id), await made(0, demoted.id), await made(0, admin.id)];
      const demotion = await server.admin(['member', 'set-role', '--workspace', workspaceId, '--user', demoted.id, '--role', 'member']);
      expect(demotion.code, demotion.stderr).to.equal(0);

      const invitee = await seedUser(server, []);
      const { agent } = await signInToSettings(invitee);
      const csrf = await sessionToken(agent);
      for (const [name, link] of [['expired', expired], ['made by an admin since demoted', byDemoted]] as const) {
        const opened = await agent.request(link);
        expect(opened.status, name).to.equal(410);
        expect(await opened.text(), name).to.include(INVALID);
        const posted = await agent.request(link, { form: { csrf, form_id: 'B'.repeat(22) } });
        expect(posted.status, `${name}: accepted all the same`).to.equal(410);
      }
      expect(await roleIn(invitee.id, workspaceId), 'not a member').to.equal(undefined);

      const viewer = await memberOf(server, workspaceId, 'viewer');
      const { agent: member } = await signInToSettings(viewer);
      const { page, html } = await accept(member, current);
      expect(page.status).to.equal(200);
      expect(html).to.include('You are already a member of Invite Refused Ltd').and.to.include('Your role there stays viewer');
      const posted = await member.request(current, { form: { csrf: await sessionToken(member), form_id: 'C'.repeat(22) } });
      expect(posted.status, 'accepted all the same').to.equal(409);
      expect(await posted.text()).to.include('You are already a member of Invite Refused Ltd');
      expect(await roleIn(viewer.id, workspaceId), 'role unchanged').to.equal('viewer');

      const { answer } = await accept(agent, current);
      expect(answer?.status, 'the link still works for someone else').to.equal(303);
      expect(await roleIn(invitee.id, workspaceId)).to.equal('member');
    });

    it('deletes the links of an admin demoted or removed (by the CLI or the members page): made an admin again, their links stay refused', async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Voided Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      const withAccounts = (change: (accounts: Accounts) => Promise<unknown>) => inStore((store) => change(new Accounts(store.accounts)));
      const admins = await Promise.all(Array.from({ length: 5 }, async () => {
        const user = await seedUser(server, []);
        await withAccounts((accounts) => accounts.addMember(user.id, workspaceId, 'admin'));
        return user;
      }));
      const [byCli, byPage, removedByCli, removedByPage, deleted] = admins as [SeededUser, SeededUser, SeededUser, SeededUser, SeededUser];
      const links = new Map<SeededUser, string>();
      for (const who of [...admins, admin]) links.set(who, (await invite((await signInToSettings(who)).agent, workspaceId)).link!);
      const run = async (args: string[]) => {
        const result = await server.admin(args);
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
      };
      // By the CLI, and on the members page by the first admin (a demotion, a removal), each another admin's, at once.
      const { agent } = await signInToSettings(admin);
      const onPage = async (who: SeededUser, path: string, form: Record<string, string>) => {
        const asked = await (await agent.request(`${membersUrl(workspaceId)}/${who.id}/${path}${form.role ? `?role=${form.role}` : ''}`)).text();
        const changed = await agent.request(`${membersUrl(workspaceId)}/${who.id}/${path}`, { form: { csrf: field(asked, 'csrf')!, form_id: field(asked, 'form_id')!, ...form } });
        expect(changed.status, (await changed.clone().text()).slice(0, 300)).to.equal(303);
      };
      await Promise.all([
        run(['member', 'set-role', '--workspace', workspaceId, '--user', byCli.id, '--role', 'member']),
        run(['member', 'remove', '--workspace', workspaceId, '--user', removedByCli.id]),
        run(['user', 'delete', '--user', deleted.id]),
        onPage(byPage, 'role', { role: 'viewer' }),
        onPage(removedByPage, 'remove', {}),
      ]);
      const left = await inStore((store) => store.model(INVITATION_MODEL).listBy(workspaceId));
      expect(left.map(({ payload }) => payload.invitedBy), 'only the remaining admin\'s link is kept').to.deep.equal([admin.id]);

      // Made admins again (a role change, or added back).
      await withAccounts(async (accounts) => {
        for (const { id } of [byCli, byPage, removedByCli, removedByPage]) await accounts.addMember(id, workspaceId, 'admin');
      });
      const invitee = await seedUser(server, []);
      const { agent: theirs } = await signInToSettings(invitee);
      for (const [name, who] of [['demoted by the CLI', byCli], ['demoted on the members page', byPage], ['removed by the CLI', removedByCli], ['removed on the members page', removedByPage], ['deleted', deleted]] as const) {
        const opened = await theirs.request(links.get(who)!);
        expect(opened.status, name).to.equal(410);
        expect(await opened.text(), name).to.include(INVALID);
      }
      const page = await (await agent.request(membersUrl(workspaceId))).text();
      expect(page.match(/<h3>To join as /g), 'the members page lists the one link kept').to.have.length(1);
      const { answer } = await accept(theirs, links.get(admin)!);
      expect(answer?.status, 'the remaining admin\'s link works').to.equal(303);
    });

    it(`makes no more than ${MAX_PENDING_INVITATIONS} pending invitations per workspace, and says so`, async function () {
      const admin = await seedUser(server, [{ workspace: 'Invite Cap Ltd' }]);
      const workspaceId = admin.workspaces[0]!.id;
      await inStore(async (store) => {
        const invitations = invitationsOver(store, new Accounts(store.accounts));
        for (let made = 0; made < MAX_PENDING_INVITATIONS; made += 1) await invitations.create(workspaceId, 'member', admin.id);
      });
      const { agent } = await signInToSettings(admin);
      const { response, html, link } = await invite(agent, workspaceId);
      expect(response.status).to.equal(409);
      expect(link).to.equal(undefined);
      expect(html).to.include(`this workspace has ${MAX_PENDING_INVITATIONS} pending invitations, the most it may have`);
      expect(await inStore((store) => store.model(INVITATION_MODEL).listBy(workspaceId))).to.have.length(MAX_PENDING_INVITATIONS);
    });
  });
});

/**
 * A password change checks the new password, then the current one (a sign-in's check, which takes
 * a while), then sets it, checked again: the user may have joined a workspace meanwhile. The
 * service runs in this process on a real SQLite file, so that "meanwhile" can be made to happen
 * at that moment: as the current password is looked up.
 */
describe('settings area: a password refused as it is set', function () {
  this.timeout(30_000);

  let dir: string;
  let store: Store;
  let revocations: RevocationList;
  let server: Server;
  let origin: string;
  let accounts: Accounts;
  /** Run once, as the next sign-in check looks its user up. */
  let meanwhile: (() => Promise<unknown>) | undefined;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oauth-password-race-'));
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      STORE: `sqlite:${join(dir, 'oauth.sqlite')}`, XDG_CONFIG_HOME: join(dir, 'config'), PORT: String(port), HOST: '127.0.0.1', BASE_URL: origin, METRICS: 'off',
    });
    store = openStore(config.store);
    const lookingUp = new Proxy(store.accounts, {
      get(target, name: keyof Store['accounts']) {
        const value = target[name];
        if (name !== 'findUserByEmail') return typeof value === 'function' ? value.bind(target) : value;
        return async (email: string) => {
          const run = meanwhile;
          meanwhile = undefined;
          await run?.();
          return target.findUserByEmail(email);
        };
      },
    });
    const racing: Store = new Proxy(store, {
      get(target, name: keyof Store) {
        if (name === 'accounts') return lookingUp;
        const value = target[name];
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const logger = createLogger('silent');
    const keys = await loadKeys(store.settings, await loadKeyRing(config, logger), undefined);
    revocations = new RevocationList(store.revocations);
    await revocations.start();
    const service = createService({ config, store: racing, keys, revocations, logger, metrics: undefined });
    accounts = service.accounts;
    server = createHttpServer(service.app.callback());
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  });

  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server ? server.close(resolve) : resolve(undefined));
    revocations?.stop();
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('says so to the user in the page\'s own words, when they joined a workspace of that name meanwhile', async function () {
    const workspace = await accounts.createWorkspace('Race Ltd');
    const password = 'a long enough password';
    const { user } = await accounts.createMember({ email: 'racer@example.com', name: 'Rae Racer', password }, workspace.id, 'admin');
    const agent = new UserAgent();
    const login = await agent.follow(`${origin}/settings`, origin);
    const html = await login.response.text();
    const posted = await agent.request(new URL(formAction(html)!, origin).href, { form: { csrf: field(html, 'csrf')!, email: user.email, password } });
    await agent.follow(new URL(posted.headers.get('location')!, origin).href, origin);
    const form = await (await agent.request(`${origin}/settings/password`)).text();
    const next = 'Zanzibar Works 2031';

    meanwhile = async () => accounts.addMember(user.id, (await accounts.createWorkspace('Zanzibar Works')).id, 'member');
    const answer = await agent.request(new URL(formAction(form)!, origin).href, { form: { csrf: field(form, 'csrf')!, current_password: password, new_password: next, confirm_password: next } });
    expect(meanwhile, 'the workspace was joined during the change').to.equal(undefined);
    expect(answer.status).to.equal(400);
    const refusal = /<p class="error" role="alert" id="password-error">([^<]*)<\/p>/.exec(await answer.text())?.[1];
    expect(refusal).to.equal('A password cannot be the name of the service or of a workspace you belong to, which attackers try first. Choose another: a few unrelated words make a strong one.');
    expect((await accounts.authenticate(user.email, password)).user?.id, 'the password is the one it was').to.equal(user.id);
  });
});
