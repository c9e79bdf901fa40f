import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { codeRequest, REDIRECT_URI, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, field, formAction } from '../support/user_agent.ts';

/**
 * The product's own forms (sign-in, consent, the settings area; the sign-out question in
 * logout.test.ts) sent from another site's page, over HTTP: refused with 403 and words saying so,
 * nothing done, even with the form's CSRF token; the same forms from the service's own pages, or
 * from a client that says nothing of where it sends from, work. The engine's endpoints still take
 * forms from other sites.
 */
describe('forms of the product\'s pages sent from another site', function () {
  this.timeout(30_000);

  let server: TestServer;
  let client: RegisteredClient;
  let own: Record<string, string>;

  /** What a browser sends with a form from another site's page: Sec-Fetch-Site, or from one that does not send it, Origin. */
  const FOREIGN: Array<Record<string, string>> = [
    { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
    { 'sec-fetch-site': 'same-site' },
    { origin: 'https://evil.example' },
  ];

  before(async () => {
    server = await startServer();
    client = await registerClient(server.issuer, { client_name: 'Cross Site App' });
    // Sec-Fetch-Site decides where it is sent (Chromium sends Origin: null under the pages' Referrer-Policy: no-referrer).
    own = { 'sec-fetch-site': 'same-origin', origin: 'null' };
  });

  after(async () => {
    await server?.stop();
  });

  async function expectRefused(response: Response, what: string): Promise<string> {
    expect(response.status, what).to.equal(403);
    expect(response.headers.get('content-type'), what).to.match(/^text\/html/);
    const html = await response.text();
    expect(html, what).to.include('<h1>Sent from another site</h1>')
      .and.include('This form was sent from another website, not from this service’s own page, so nothing was done.')
      .and.include('open the page again from this service').and.not.include('signed in');
    return html;
  }

  /** The request line (JSON) of the request answered with `response`, waiting a moment for the asynchronously written log. */
  async function requestLine(response: Response): Promise<Record<string, unknown> | undefined> {
    const id = response.headers.get('x-request-id');
    for (const deadline = Date.now() + 3000; ; await sleep(50)) {
      const line = server.logs().split('\n').filter((text) => text.startsWith('{')).map((text) => JSON.parse(text) as Record<string, unknown>)
        .find((logged) => logged.message === 'request' && logged.request_id === id);
      if (line || Date.now() > deadline) return line;
    }
  }

  /** The login page of a new authorization request: its form's address and token. */
  async function loginPage(agent: UserAgent): Promise<{ action: string; csrf: string; page: string }> {
    const { url, response } = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
    const html = await response.text();
    return { action: new URL(formAction(html)!, server.origin).href, csrf: field(html, 'csrf')!, page: url };
  }

  it('refuses the sign-in and consent forms from another site, token and all, and takes them from the service\'s page', async () => {
    const user = await seedUser(server, [{ workspace: 'Cross Site Ltd' }]);
    const agent = new UserAgent();
    const login = await loginPage(agent);
    const credentials = { csrf: login.csrf, email: user.email, password: user.password };
    const refusals: Response[] = [];
    for (const headers of FOREIGN) {
      const refused = await agent.request(login.action, { form: credentials, headers });
      refusals.push(refused);
      await expectRefused(refused, `sign-in, ${JSON.stringify(headers)}`);
    }
    expect(await (await agent.request(login.page)).text(), 'not signed in: the sign-in page still asks').to.include('name="password"');
    // The log tells the refusal from a forged form's (a token not the page's), which is a 403 too.
    const forgedSignIn = await agent.request(login.action, { form: { ...credentials, csrf: 'forged' }, headers: own });
    expect(forgedSignIn.status, 'a forged token from the service\'s page').to.equal(403);
    const lines = await Promise.all([...refusals, forgedSignIn].map(requestLine));
    expect(lines.map((line) => [line?.status, line?.error]), 'the request lines name each refusal').to.deep.equal([...FOREIGN.map(() => [403, 'cross_site_form']), [403, 'invalid_request']]);

    const signedIn = await agent.request(login.action, { form: credentials, headers: own });
    expect(signedIn.status, 'the same form from the service\'s page').to.equal(303);
    const { url: consentUrl, response: consentPage } = await agent.follow(new URL(signedIn.headers.get('location')!, server.origin).href, server.origin);
    const html = await consentPage.text();
    const decision = { csrf: field(html, 'csrf')!, decision: 'allow', workspace: field(html, 'workspace')! };
    const consentAction = new URL(formAction(html)!, server.origin).href;
    expect(consentAction).to.match(/\/consent$/);
    for (const headers of FOREIGN) await expectRefused(await agent.request(consentAction, { form: decision, headers }), `consent, ${JSON.stringify(headers)}`);
    expect(await (await agent.request(consentUrl)).text(), 'no consent given: the consent page still asks').to.include('value="allow"');

    // A browser that sends no Sec-Fetch-Site sends Origin: null with the page's own form (Referrer-Policy: no-referrer):
    // that says nothing, and neither does a client that sends neither header (curl): the CSRF token decides, as before.
    const forged = await agent.request(consentAction, { form: { ...decision, csrf: 'not the token' }, headers: { origin: 'null' } });
    expect(forged.status, 'Origin: null with a wrong token: the token check refuses it').to.be.within(400, 499);
    expect(await forged.text(), 'the token check\'s refusal, not the other site\'s').to.not.include('Sent from another site');
    const allowed = await agent.request(consentAction, { form: decision, headers: { origin: 'null' } });
    expect(allowed.status).to.equal(303);
    const callback = await agent.follow(new URL(allowed.headers.get('location')!, server.origin).href, server.origin);
    expect(callback.url.startsWith(REDIRECT_URI), callback.url).to.equal(true);
    expect(new URL(callback.url).searchParams.get('code')).to.be.a('string');
  });

  /** Signed in to the settings area (its forms sent as the service's pages send them). */
  async function signInToSettings(user: SeededUser): Promise<UserAgent> {
    const agent = new UserAgent();
    const login = await agent.follow(`${server.issuer}/settings`, server.origin);
    const html = await login.response.text();
    const posted = await agent.request(new URL(formAction(html)!, server.origin).href, { form: { csrf: field(html, 'csrf')!, email: user.email, password: user.password }, headers: own });
    await agent.follow(new URL(posted.headers.get('location')!, server.origin).href, server.origin);
    return agent;
  }

  it('refuses a settings form from another site, token and all: the password is not changed; from the service\'s page it is', async () => {
    const user = await seedUser(server, [{ workspace: 'Cross Site Settings Ltd' }]);
    const agent = await signInToSettings(user);
    const passwordUrl = `${server.issuer}/settings/password`;
    const csrf = field(await (await agent.request(passwordUrl)).text(), 'csrf')!;
    const change = (to: string) => ({ csrf, current_password: user.password, new_password: to, confirm_password: to });
    for (const headers of FOREIGN) {
      const html = await expectRefused(await agent.request(passwordUrl, { form: change('chosen elsewhere 1234'), headers }), `password, ${JSON.stringify(headers)}`);
      expect(html, 'back to settings, as every settings refusal').to.include('Back to settings');
    }
    // Still the old password: the change from the service's page checks it as the current one.
    const changed = await agent.request(passwordUrl, { form: change('chosen here at last 5678'), headers: own });
    expect(changed.status, (await changed.clone().text()).slice(0, 300)).to.equal(303);
    expect(changed.headers.get('location')).to.match(/done=password-changed$/);
  });

  it('still takes an authorization request posted from another site (a client\'s form_post), and answers the token endpoint as before', async () => {
    const { params } = codeRequest(server.issuer, client.client_id);
    const posted = await fetch(`${server.issuer}/oauth/authorize`, {
      method: 'POST', redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
      body: new URLSearchParams(params).toString(),
    });
    expect(posted.status).to.equal(303);
    const asked = await new UserAgent().follow(new URL(posted.headers.get('location')!, server.origin).href, server.origin);
    expect(await asked.response.text(), 'the sign-in page of the request').to.include('name="password"');

    const token = await fetch(`${server.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'nobody', client_secret: 'x' }).toString(),
    });
    expect(token.status).to.equal(401);
    expect(((await token.json()) as { error: string }).error).to.equal('invalid_client');
  });
});
