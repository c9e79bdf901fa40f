import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import { Accounts } from '../../src/accounts/accounts.ts';
import { codeRequest, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { field, formAction, UserAgent } from '../support/user_agent.ts';

/**
 * The consent form is answered once: sent again, at once (a double click) or later (the back
 * button), it goes on with its first answer, and the user has one grant for the application,
 * never one per submission, nor one left behind by a later deny. Answered by a user who by then
 * belongs to no workspace, it is a denial the application hears of.
 */
describe('the consent form\'s answers', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;
  let client: RegisteredClient;

  before(async () => {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Once Co' }]);
    client = await registerClient(server.issuer, { client_name: 'Once App' });
  });

  after(async () => {
    await server?.stop();
  });

  /** Signs in and stops at the consent page: where its form posts, and the answer to send. */
  async function consentPage(agent: UserAgent, who: SeededUser = user, app: RegisteredClient = client): Promise<{ html: string; action: string; form: (decision: 'allow' | 'deny') => Record<string, string> }> {
    const login = await agent.follow(codeRequest(server.issuer, app.client_id).url, server.origin);
    const loginHtml = await login.response.text();
    const signedIn = await agent.request(new URL(formAction(loginHtml)!, server.origin).href, { form: { csrf: field(loginHtml, 'csrf')!, email: who.email, password: who.password } });
    const consent = await agent.follow(new URL(signedIn.headers.get('location')!, server.origin).href, server.origin);
    const html = await consent.response.text();
    const action = formAction(html);
    expect(action, `the consent page: ${html.slice(0, 300)}`).to.match(/\/consent$/);
    const csrf = field(html, 'csrf')!;
    return { html, action: new URL(action!, server.origin).href, form: (decision) => ({ csrf, decision, workspace: who.workspaces[0]!.id }) };
  }

  async function grantsOfUser(): Promise<number> {
    const store = openStore(server.store);
    try {
      return (await store.model('Grant').listBy(user.id)).length;
    } finally {
      await store.close();
    }
  }

  it('names the user\'s role in the workspace, and says the application changes records only if that role allows (a viewer\'s tokens only read)', async () => {
    const viewer = await seedUser(server, [{ workspace: 'Read Only Co', role: 'viewer' }]);
    const { html } = await consentPage(new UserAgent(), viewer);
    expect(html).to.contain('Workspace: Read Only Co <span class="role">(viewer)</span>');
    expect(html).to.contain('and change them if your role there allows').and.not.contain('Read and change');
  });

  it('makes one grant for allow sent three times at once, and a deny sent after it changes nothing', async () => {
    const agent = new UserAgent();
    const { action, form } = await consentPage(agent);
    const answers = await Promise.all([1, 2, 3].map(() => agent.request(action, { form: form('allow') })));
    expect(answers.map((answer) => answer.status)).to.deep.equal([303, 303, 303]);
    const denied = await agent.request(action, { form: form('deny') });
    expect(denied.status).to.equal(303);

    const back = await agent.follow(new URL(denied.headers.get('location')!, server.origin).href, server.origin);
    expect(new URL(back.url).searchParams.has('code'), `the first answer, allow, stands: ${back.url}`).to.equal(true);
    expect(await grantsOfUser()).to.equal(1);
  });

  it('makes no grant for an application deleted while its consent page was open, and says it is gone', async () => {
    const doomed = await registerClient(server.issuer, { client_name: 'Soon Deleted App' });
    const agent = new UserAgent();
    const { action, form } = await consentPage(agent, user, doomed);
    const grantsBefore = await grantsOfUser();
    const deleted = await fetch(doomed.registration_client_uri, { method: 'DELETE', headers: { authorization: `Bearer ${doomed.registration_access_token}` } });
    expect(deleted.status).to.equal(204);
    const answer = await agent.request(action, { form: form('allow') });
    expect(answer.status).to.equal(400);
    expect(await answer.text()).to.contain('no longer registered');
    expect(await grantsOfUser(), 'no grant for the deleted application').to.equal(grantsBefore);
  });

  it('says the workspace chosen is no longer the user\'s when they were removed from it while the page was open, and grants nothing there', async () => {
    const twoPlaces = await seedUser(server, [{ workspace: 'Left Co', role: 'member' }, { workspace: 'Stayed Co' }]);
    const agent = new UserAgent();
    const { action, form } = await consentPage(agent, twoPlaces);
    const store = openStore(server.store);
    try {
      await new Accounts(store.accounts).removeMember(twoPlaces.id, twoPlaces.workspaces[0]!.id);
    } finally {
      await store.close();
    }
    const answer = await agent.request(action, { form: form('allow') });
    expect(answer.status).to.equal(400);
    const html = await answer.text();
    expect(html).to.contain('The workspace you chose is not one of yours, or no longer').and.contain('Stayed Co').and.not.contain('Left Co');
  });

  describe('answered by a user in no workspace', () => {
    it('tells the application access_denied, on the page that lets the user sign out, when their only workspace was deleted before they answered', async () => {
      const loner = await seedUser(server, [{ workspace: 'Soon Gone Co' }]);
      const agent = new UserAgent();
      const { action, form } = await consentPage(agent, loner);
      const store = openStore(server.store);
      try {
        await new Accounts(store.accounts).deleteWorkspace(loner.workspaces[0]!.id);
      } finally {
        await store.close();
      }
      const answered = await agent.request(action, { form: form('allow') });
      expect(answered.status, await answered.clone().text()).to.equal(303);
      // The application registered itself: the answer is held on a page, with the link back that carries it.
      const held = await agent.follow(new URL(answered.headers.get('location')!, server.origin).href, server.origin);
      expect(held.response.status).to.equal(400);
      const html = await held.response.text();
      expect(html).to.include('Once App was not given access').and.include('not a member of any workspace');
      const back = new URL(/<a id="return-to-client" href="([^"]+)"/.exec(html)![1]!.replaceAll('&amp;', '&'));
      expect(back.searchParams.get('error')).to.equal('access_denied');
      expect(back.searchParams.get('error_description')).to.match(/not a member of any workspace/);
      expect(html, 'a way to use another account').to.include(`<a href="${server.issuer}/oauth/logout">Sign out</a>`);
    });
  });
});
