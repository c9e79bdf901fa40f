import { expect } from 'chai';

import { codeRequest, registerClient } from '../support/oauth.ts';
import { startServer, type TestServer } from '../support/server.ts';
import { UserAgent } from '../support/user_agent.ts';

/** The login and consent forms answer what they refuse with the page a browser can show, never JSON (found by the fuzz suite). */
describe('interaction forms that cannot be read', function () {
  this.timeout(30_000);

  let server: TestServer;

  before(async () => {
    server = await startServer();
  });

  after(async () => {
    await server?.stop();
  });

  it('answers a login form over 16 KiB with 413 and the error page', async () => {
    const client = await registerClient(server.issuer);
    const agent = new UserAgent();
    const { response } = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
    const action = /<form method="post" action="([^"]+)"/.exec(await response.text())![1]!;
    const posted = await agent.request(new URL(action, server.origin).href, { form: { email: 'a@example.com', password: 'x'.repeat(20 * 1024) } });
    expect(posted.status).to.equal(413);
    expect(posted.headers.get('content-type')).to.match(/^text\/html/);
    expect(await posted.text()).to.include('larger than this server accepts');
  });

  it('answers a form whose body is not what its Content-Encoding says with 400 and the error page, never a 500', async () => {
    const client = await registerClient(server.issuer);
    for (const encoding of ['gzip', 'deflate', 'br']) {
      // Every request of this browser says its body is compressed; a GET has none to read.
      const agent = new UserAgent({ 'content-encoding': encoding });
      const { response } = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
      const action = /<form method="post" action="([^"]+)"/.exec(await response.text())![1]!;
      const forms = {
        'the login form': new URL(action, server.origin).href,
        'the authorization request by POST': `${server.issuer}/oauth/authorize`,
        'the logout request by POST': `${server.issuer}/oauth/logout`,
      };
      for (const [what, url] of Object.entries(forms)) {
        const posted = await agent.request(url, { form: { email: 'a@example.com', password: 'not compressed', client_id: client.client_id } });
        expect(posted.status, `${what}, ${encoding}`).to.equal(400);
        expect(posted.headers.get('content-type'), `${what}, ${encoding}`).to.match(/^text\/html/);
      }
    }
    expect(server.logs(), 'no server error logged').not.to.match(/"level":"error"/);
  });

  it('answers the address a sign-in form posted to, opened again (from the address bar or history), with the page of its interaction, not 405', async () => {
    const client = await registerClient(server.issuer);
    const agent = new UserAgent();
    const { url: pageUrl, response } = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
    const html = await response.text();
    const action = /<form method="post" action="([^"]+)"/.exec(html)![1]!;
    const csrf = /name="csrf" value="([^"]*)"/.exec(html)![1]!;
    const refused = await agent.request(new URL(action, server.origin).href, { form: { csrf, email: 'nobody@example.com', password: 'not the password' } });
    expect(refused.status).to.equal(400);
    for (const step of ['login', 'consent']) {
      const opened = await agent.request(new URL(action.replace(/\/login$/, `/${step}`), server.origin).href);
      expect([opened.status, opened.headers.get('location')], step).to.deep.equal([303, new URL(pageUrl).pathname]);
      const { response: page } = await agent.follow(new URL(action.replace(/\/login$/, `/${step}`), server.origin).href, server.origin);
      expect(await page.text(), step).to.include('name="password"');
    }
  });
});
