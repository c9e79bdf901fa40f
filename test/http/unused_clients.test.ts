import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';

import { codeRequest, exchangeCode, management, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

const UNUSED_CLIENT_TTL = 4;

/** A self-registered client that never obtains a token is removed, so a registration flood cannot fill the store. */
describe('unused self-registered clients', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;

  before(async () => {
    server = await startServer({ env: { UNUSED_CLIENT_TTL: String(UNUSED_CLIENT_TTL) } });
    user = await seedUser(server);
  });

  after(async () => {
    await server?.stop();
  });

  /** When the store will drop a record: its expires_at (seconds), or null for never; undefined when absent. */
  function storedExpiry(where: string, ...params: string[]): Array<number | null> {
    const db = new DatabaseSync(server.store.slice('sqlite:'.length), { readOnly: true });
    try {
      const rows = db.prepare(`SELECT expires_at FROM oidc_models WHERE ${where}`).all(...params) as Array<{ expires_at: number | null }>;
      return rows.map((row) => row.expires_at);
    } finally {
      db.close();
    }
  }
  const clientExpiry = (client: RegisteredClient) => storedExpiry("model = 'Client' AND id = ?", client.client_id);
  const tokenExpiry = (client: RegisteredClient) => storedExpiry("model = 'RegistrationAccessToken' AND listed_by = ?", client.client_id);

  async function completeAFlow(client: RegisteredClient): Promise<void> {
    const request = codeRequest(server.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), request.url, server.origin, { email: user.email, password: user.password });
    const response = await exchangeCode(server.issuer, client, callback.searchParams.get('code')!, request.verifier);
    expect(response.status, await response.clone().text()).to.equal(200);
  }

  it('removes a client that never obtained a token, with its registration access token, and keeps one that did and one an operator vetted', async () => {
    const registeredAt = Math.floor(Date.now() / 1000);
    const [unused, used, vetted] = await Promise.all([
      registerClient(server.issuer, { client_name: 'Never used' }),
      registerClient(server.issuer, { client_name: 'Used once' }),
      registerVettedClient(server, { client_name: 'Vetted, never used' }),
    ]);
    expect(unused, 'the probation is the server\'s business').to.not.have.property('unused_until');

    const [expiry] = clientExpiry(unused);
    expect(expiry).to.be.within(registeredAt + UNUSED_CLIENT_TTL - 1, registeredAt + UNUSED_CLIENT_TTL + 2);
    expect(tokenExpiry(unused), 'its registration access token goes with it').to.deep.equal([expiry]);
    expect(clientExpiry(vetted)).to.deep.equal([null]);
    expect(tokenExpiry(vetted)).to.deep.equal([null]);

    await completeAFlow(used);
    await eventually('the used client is kept for good', async () => clientExpiry(used)[0] === null && tokenExpiry(used)[0] === null, 15_000, 250);

    await eventually('the unused client is gone', async () => (await management(unused.registration_client_uri, unused.registration_access_token)).status === 401, 15_000, 250);
    // Instances may serve a client read within the propagation bound (2 s) a little longer.
    await eventually('authorization requests for the unused client get the unknown-application page', async () => {
      const landing = await new UserAgent().follow(codeRequest(server.issuer, unused.client_id).url, server.origin);
      return landing.response.status === 400 && (await landing.response.text()).includes('invalid_client');
    }, 15_000, 250);

    for (const kept of [used, vetted]) {
      const read = await management(kept.registration_client_uri, kept.registration_access_token);
      expect(read.status, kept.client_name).to.equal(200);
      expect(await read.json()).to.not.have.property('unused_until');
    }
  });

  it('does not extend the probation when the client updates itself (an update is not a use)', async () => {
    const client = await registerClient(server.issuer, { client_name: 'Busy updating' });
    const [before] = clientExpiry(client);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const update = await management(client.registration_client_uri, client.registration_access_token, 'PUT', {
      client_id: client.client_id, client_name: 'Busy updating (renamed)', redirect_uris: client.redirect_uris, unused_until: 4_000_000_000,
    });
    expect(update.status, await update.clone().text()).to.equal(200);
    const updated = await update.json() as RegisteredClient;
    expect(updated).to.not.have.property('unused_until');
    expect(clientExpiry(client)).to.deep.equal([before]);
    expect(tokenExpiry(client), 'the rotated registration access token expires with it').to.deep.equal([before]);
  });
});
