import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';
import { codeRequest, exchangeCode, postCredentials, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * What the settings area keeps, seen in the store the server writes to (its SQLite file), through
 * real HTTP: a grant's last use written at most once a minute and removed with the grant, and the
 * settings area's own sign-in leaving no code behind.
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

  it('signing in to the settings area leaves no authorization code behind', async function () {
    const user = await seedUser(server, [{ workspace: 'No Code Ltd' }]);
    const { agent, landed } = await signInToSettings(user);
    expect(landed).to.equal(`${server.issuer}/settings`);
    const settings = await agent.request(`${server.issuer}/settings`);
    expect(settings.status).to.equal(200);
    expect(await settings.text()).to.include(`Signed in as <strong>${user.email}</strong>`);
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
});
