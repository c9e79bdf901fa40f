import { expect } from 'chai';

import { REDIRECT_URI, codeRequest, exchangeCode, introspect, postCredentials, registerClient, tokenRequest } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

describe('start-up and restart', () => {
  let server: TestServer;
  let user: SeededUser;

  before(async () => {
    server = await startServer();
  });

  after(async () => {
    await server.stop();
  });

  it('tells the operator how to create the first workspace and user when there are none', () => {
    expect(server.logs()).to.contain('npm run admin -- quickstart');
    expect(server.logs()).to.contain('npm run admin -- workspace create, then user create');
  });

  it('keeps clients, grants, refresh tokens, sessions and signing keys across a restart', async () => {
    user = await seedUser(server);
    const client = await registerClient(server.issuer);
    const agent = new UserAgent();
    const first = codeRequest(server.issuer, client.client_id, { scope: 'api' });
    const redirect = await authorize(agent, first.url, server.origin, user);
    const credentials = postCredentials(client);
    const exchanged = await exchangeCode(server.issuer, client, redirect.searchParams.get('code')!, first.verifier);
    const tokens = await exchanged.json() as { access_token: string; refresh_token: string };
    const jwksBefore = await (await fetch(`${server.issuer}/oauth/jwks`)).json();

    await server.restart();

    // The access token is still accepted (same signing keys, record kept).
    expect(await introspect(server.issuer, credentials, tokens.access_token)).to.include({ active: true });
    expect(await (await fetch(`${server.issuer}/oauth/jwks`)).json()).to.deep.equal(jwksBefore);

    // The refresh token and the client survive.
    const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...credentials });
    expect(refreshed.status).to.equal(200);

    // The browser session and the consent survive: no login or consent page this time.
    const second = codeRequest(server.issuer, client.client_id, { scope: 'api' });
    const again = await authorize(agent, second.url, server.origin, {
      email: 'not-used@example.com', password: 'not-used',
    });
    expect(again.origin + again.pathname).to.equal(REDIRECT_URI);
    expect(again.searchParams.get('code')).to.be.a('string');
    expect(again.searchParams.get('state')).to.equal(second.state);

    // Nothing secret reached the log on the way.
    const logs = server.logs();
    expect(logs).to.contain('"message":"request"');
    for (const secret of [client.client_secret!, client.registration_access_token, user.password, tokens.access_token, tokens.refresh_token, redirect.searchParams.get('code')!]) {
      expect(logs).to.not.contain(secret);
    }
  });
});
