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
});
