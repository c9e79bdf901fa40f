import { expect } from 'chai';

import { REDIRECT_URI, authorizationUrl, pkcePair, registerClient, tokenRequest } from './helpers/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from './helpers/server.ts';
import { UserAgent, authorize } from './helpers/user_agent.ts';

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
    expect(server.logs()).to.contain('npm run admin -- workspace create');
    expect(server.logs()).to.contain('npm run admin -- user create');
  });

  it('keeps clients, grants, refresh tokens, sessions and signing keys across a restart', async () => {
    user = await seedUser(server);
    const client = await registerClient(server.issuer);
    const agent = new UserAgent();
    const { verifier, challenge } = pkcePair();
    const params = {
      client_id: client.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api', code_challenge: challenge, code_challenge_method: 'S256',
    };
    const redirect = await authorize(agent, authorizationUrl(server.issuer, { ...params, state: 's1' }), server.origin, user);
    const credentials = { client_id: client.client_id, client_secret: client.client_secret! };
    const exchanged = await tokenRequest(server.issuer, {
      grant_type: 'authorization_code', code: redirect.searchParams.get('code')!, redirect_uri: REDIRECT_URI, code_verifier: verifier, ...credentials,
    });
    const tokens = await exchanged.json() as { access_token: string; refresh_token: string };
    const jwksBefore = await (await fetch(`${server.issuer}/oauth/jwks`)).json();

    await server.restart();

    // The access token is still accepted (same signing keys, record kept).
    const userinfo = await fetch(`${server.issuer}/oauth/introspect`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: tokens.access_token, ...credentials }),
    });
    expect(await userinfo.json()).to.include({ active: true });
    expect(await (await fetch(`${server.issuer}/oauth/jwks`)).json()).to.deep.equal(jwksBefore);

    // The refresh token and the client survive.
    const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...credentials });
    expect(refreshed.status).to.equal(200);

    // The browser session and the consent survive: no login or consent page this time.
    const second = pkcePair();
    const again = await authorize(agent, authorizationUrl(server.issuer, { ...params, state: 's2', code_challenge: second.challenge }), server.origin, {
      email: 'not-used@example.com', password: 'not-used',
    });
    expect(again.origin + again.pathname).to.equal(REDIRECT_URI);
    expect(again.searchParams.get('code')).to.be.a('string');
    expect(again.searchParams.get('state')).to.equal('s2');

    // Nothing secret reached the log on the way.
    const logs = server.logs();
    expect(logs).to.contain('"message":"request"');
    for (const secret of [client.client_secret!, client.registration_access_token, user.password, tokens.access_token, tokens.refresh_token, redirect.searchParams.get('code')!]) {
      expect(logs).to.not.contain(secret);
    }
  });
});
