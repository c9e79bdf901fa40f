import { expect } from 'chai';

import { api, createApiKey } from '../support/data_api.ts';
import { codeRequest, exchangeCode, introspect, postCredentials, registerClient, revokeToken, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import type { TokenSet } from '../support/drill.ts';
import { startReplicated } from '../support/redis.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 21).toString('base64url');

/** A refusal for want of the replicas: 503, Retry-After, the JSON error, and nothing issued. */
async function expectUnavailable(response: Response): Promise<void> {
  expect(response.status).to.equal(503);
  expect(response.headers.get('retry-after')).to.match(/^\d+$/);
  const body = await response.json() as Record<string, unknown>;
  expect(body).to.include({ error: 'temporarily_unavailable' });
  expect(body).to.not.have.any.keys('access_token', 'refresh_token');
}

/** The service on a Redis primary with one replica, its writes acknowledged only once the replica holds them. */
describe('REDIS_WAIT_REPLICAS: the service while its Redis replica does not confirm writes', function () {
  this.timeout(120_000);
  let redis: Awaited<ReturnType<typeof startReplicated>>;
  let server: TestServer;
  let user: SeededUser;
  let client: RegisteredClient;

  before(async () => {
    redis = await startReplicated();
    server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY, REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT: '1s' } });
    user = await seedUser(server);
    client = await registerClient(server.issuer, { client_name: 'Replicated App' });
  });

  after(async () => {
    await server?.stop();
    await redis?.stop();
  });

  async function code(): Promise<{ code: string; verifier: string }> {
    const { url, verifier } = codeRequest(server.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    return { code: callback.searchParams.get('code')!, verifier };
  }

  async function tokens(): Promise<TokenSet> {
    const { code: value, verifier } = await code();
    const response = await exchangeCode(server.issuer, client, value, verifier);
    expect(response.status).to.equal(200);
    return response.json() as Promise<TokenSet>;
  }

  const refresh = (refreshToken: string) => tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });
  const revoke = (token: string) => revokeToken(server.issuer, client, token);

  it('issues tokens while the replica confirms; answers 503 with Retry-After, never a token, while it does not; and issues again once it has caught up', async () => {
    const issued = await tokens();
    const refreshed = await refresh(issued.refresh_token);
    expect(refreshed.status).to.equal(200);
    const chain = await refreshed.json() as TokenSet;
    const pending = await code();

    redis.replica.pause();
    try {
      await expectUnavailable(await refresh(chain.refresh_token));
      await expectUnavailable(await exchangeCode(server.issuer, client, pending.code, pending.verifier));
      await expectUnavailable(await revoke(chain.access_token));
      await expectUnavailable(await revoke(chain.refresh_token));
      // What needs no write is still served: a token issued before is still introspected as active.
      expect(await introspect(server.issuer, postCredentials(client), chain.access_token)).to.include({ active: true });
    } finally {
      redis.replica.resume();
    }

    // A new sign-in and code exchange goes through once the replica has caught up.
    const again = await eventually('a code is exchanged again', async () => {
      try {
        return await tokens();
      } catch {
        return undefined;
      }
    }, 30_000, 250);
    const revoked = await revoke(again.access_token);
    expect(revoked.status).to.equal(200);
    expect(await introspect(server.issuer, postCredentials(client), again.access_token)).to.deep.equal({ active: false });
    expect((await refresh(again.refresh_token)).status).to.equal(200);
  });

  it('a refresh or code exchange refused with 503 uses nothing up: once the replica has caught up, the same refresh token and code are redeemed, and the refresh token\'s successor after it', async () => {
    const chain = await tokens();
    const pending = await code();

    redis.replica.pause();
    try {
      await expectUnavailable(await refresh(chain.refresh_token));
      await expectUnavailable(await exchangeCode(server.issuer, client, pending.code, pending.verifier));
    } finally {
      redis.replica.resume();
    }

    const again = await eventually('the refused refresh token is redeemed', async () => {
      const response = await refresh(chain.refresh_token);
      if (response.status === 503) return undefined;
      expect(response.status).to.equal(200);
      return response.json() as Promise<TokenSet>;
    }, 30_000, 250);
    expect((await refresh(again.refresh_token)).status).to.equal(200);
    expect((await exchangeCode(server.issuer, client, pending.code, pending.verifier)).status).to.equal(200);
  });

  it('a data API create answered 503 may have been made on the primary; its retry under the same Idempotency-Key gets that record, never a second', async () => {
    const { key } = await createApiKey(server, user.workspaces[0]!.id);
    const create = () => api<{ data: { company: { id: string } } }>(server, '/rest/companies', {
      credential: key, json: { name: 'Made during the outage' }, headers: { 'idempotency-key': 'retry-me-1' },
    });
    const made = async () => (await api<{ data: { companies: Array<{ id: string; name: string }> } }>(server, '/rest/companies?limit=100', { credential: key }))
      .body.data.companies.filter(({ name }) => name === 'Made during the outage');

    redis.replica.pause();
    try {
      const refused = await create();
      expect(refused.status).to.equal(503);
      // The primary applied it; only the replica's confirmation was missing.
      expect(await made()).to.have.length(1);
    } finally {
      redis.replica.resume();
    }

    const retried = await eventually('the create is retried once the replica confirms', async () => {
      const response = await create();
      return response.status === 503 ? undefined : response;
    }, 30_000, 250);
    expect(retried.status).to.equal(201);
    expect(retried.headers.get('idempotent-replayed')).to.equal('true');
    const records = await made();
    expect(records.map(({ id }) => id)).to.deep.equal([retried.body.data.company.id]);
  });
});
