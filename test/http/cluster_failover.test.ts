import { expect } from 'chai';

import { storedId } from '../../src/engine/records_at_rest.ts';
import { api, createApiKey } from '../support/data_api.ts';
import { mixedLoad, newChain, type Chain, type TokenSet } from '../support/drill.ts';
import { codeRequest, exchangeCode, introspect, postCredentials, registerClient, revokeToken, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { redisCli, startCluster, type Shard } from '../support/redis.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 29).toString('base64url');

/**
 * The cluster failover drill: three primaries with one replica each (cluster-node-timeout 2 s),
 * two instances of the service with REDIS_WAIT_REPLICAS=1 under steady mixed load; the primary
 * that holds a settled chain's refresh token killed with SIGKILL. Its replica takes its slots
 * over by itself, as in production (no CLUSTER FAILOVER); the instances follow without a restart.
 * Writes to that shard are refused (503 with Retry-After) until its new primary has a replica
 * again: the old one, restarted on its directory, rejoins as that. Everything acknowledged before,
 * during and after is there, every chain keeps rotating (one whose rotation was refused or cut
 * included), and no refresh token is rotated twice.
 */
describe('Redis Cluster failover under load, writes waiting for a replica', function () {
  this.timeout(240_000);
  let cluster: Awaited<ReturnType<typeof startCluster>>;
  let instances: TestServer[];
  let user: SeededUser;
  let client: RegisteredClient;

  before(async () => {
    cluster = await startCluster(3, 1);
    const env = { KEY_ENCRYPTION_KEY, REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT: '1s', RATE_LIMITS: 'off' };
    instances = [await startServer({ store: cluster.url, env })];
    // Behind one load balancer: one issuer, each instance on its own port.
    instances.push(await startServer({ store: cluster.url, env: { ...env, BASE_URL: instances[0]!.issuer } }));
    user = await seedUser(instances[0]!);
    client = await registerClient(instances[0]!.issuer, { client_name: 'Cluster Drill App' });
  });

  after(async () => {
    for (const instance of instances ?? []) await instance.stop();
    await cluster?.stop();
  });

  it('answers 503 with Retry-After (never another 5xx) while a replica takes over a killed primary\'s slots and until it has a replica again, then keeps every acknowledged write', async () => {
    const apiKey = (await createApiKey(instances[0]!, user.workspaces[0]!.id)).key;
    let turn = 0;
    const next = () => instances[(turn += 1) % instances.length]!;
    const refresh = (refreshToken: string, on = next()) => tokenRequest(on.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });

    const chains: Chain[] = [];
    for (let i = 0; i < 6; i += 1) {
      const { url, verifier } = codeRequest(instances[0]!.issuer, client.client_id);
      // Each chain's own user agent: its own session, so its own grant.
      const callback = await authorize(new UserAgent(), url, instances[0]!.origin, { email: user.email, password: user.password });
      const response = await exchangeCode(next().issuer, client, callback.searchParams.get('code')!, verifier);
      expect(response.status).to.equal(200);
      chains.push(newChain(await response.json() as TokenSet));
    }

    // Half the chains rotate through the failover; the other half settle just before it, their last rotation acknowledged.
    const settled = chains.slice(3);
    const settling = { stopped: false };
    const load = mixedLoad({
      chains,
      next,
      refresh: (token) => refresh(token),
      revoke: (issuer, token) => revokeToken(issuer, client, token),
      createRecord: (issuer, name) => fetch(`${issuer}/rest/companies`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
      }),
      paused: (chain) => settled.includes(chain) && settling.stopped,
    });
    const until = (what: string, probe: () => boolean | Promise<boolean>, timeoutMs: number) => eventually(what, probe, timeoutMs, 50).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${load.progress()}`);
    });
    await until('load acknowledged before the failover', () => load.rotations() >= 20 && load.acknowledged.revokedAccessTokens.length >= 3 && load.acknowledged.records.length >= 5, 30_000);

    settling.stopped = true;
    await until('the settled chains between two requests', () => settled.every((chain) => !chain.inFlight), 10_000);
    // The primary holding the record of a settled chain's refresh token: that token must survive its primary's death.
    const victim = await primaryHolding(cluster.shards, `oauth:m:RefreshToken:${storedId('RefreshToken', settled[0]!.refreshToken)}`);
    const replica = victim.replicas[0]!;
    const killedAt = Date.now();
    await victim.primary.kill();
    await eventually('the replica takes over the killed primary\'s slots', async () => /^role:master/m.test(await redisCli(replica.port, 'info', 'replication')), 60_000, 100);
    const promotedAt = Date.now();
    // The killed primary comes back on its directory (its nodes.conf), as an orchestrator would restart it, and rejoins as the new primary's replica.
    await victim.primary.up();
    const restartedAt = Date.now();
    await until('every kind of write acknowledged again after the failover', () => {
      const after = (at: number) => at > restartedAt;
      return load.writtenAt.some(after) && chains.every((chain) => !chain.inDoubt)
        && load.acknowledged.records.length > 0 && load.acknowledged.revokedAccessTokens.length > 0 && load.refusedAt.every((at) => at < Date.now() - 1000);
    }, 90_000);
    const firstRefusal = load.refusedAt.find((at) => at > killedAt);
    const lastRefusal = load.refusedAt.at(-1);
    const recoveredAt = load.writtenAt.find((at) => at > (lastRefusal ?? killedAt));
    await load.stop();

    const seconds = (at: number | undefined) => (at === undefined ? 'never' : `${((at - killedAt) / 1000).toFixed(1)} s`);
    console.log(`      cluster failover drill (times after the kill): refusals from ${seconds(firstRefusal)} to ${seconds(lastRefusal)}, `
      + `replica took over at ${seconds(promotedAt)}, old primary restarted at ${seconds(restartedAt)}, writes acknowledged again from ${seconds(recoveredAt)}; ${load.refusedAt.length} refusals, all 503; `
      + `${load.doubted()} of ${chains.length} chains refused or cut mid-rotation, every one rotating again`);
    expect(load.unexpected, 'answers during the drill').to.deep.equal([]);
    expect(load.refusedAt.length, 'refusals during the failover').to.be.greaterThan(0);

    // The last rotation of each settled chain, acknowledged just before the kill, survived it (one of them on the killed primary); every chain, refused or cut mid-rotation or not, rotates.
    for (const chain of settled) expect(chain.inDoubt, 'a settled chain').to.equal(false);
    for (const chain of chains) expect((await refresh(chain.refreshToken)).status).to.equal(200);
    for (const id of load.acknowledged.records) expect((await api(next(), `/rest/companies/${id}`, { credential: apiKey })).status, id).to.equal(200);
    for (const instance of instances) {
      await eventually('every acknowledged revocation holds on every instance', async () => {
        for (const token of load.acknowledged.revokedAccessTokens) {
          if ((await introspect(instance.issuer, postCredentials(client), token)).active !== false) return false;
        }
        return true;
      }, 10_000, 250);
    }
    // Last, as a replay revokes the grant: no rotated-out refresh token is redeemed again.
    for (const token of chains.flatMap((chain) => chain.consumed)) {
      const response = await refresh(token);
      expect(response.status).to.equal(400);
      expect(await response.json()).to.include({ error: 'invalid_grant' });
    }
  });
});

/** The shard whose primary holds `key` (it must exist there). */
async function primaryHolding(shards: Shard[], key: string): Promise<Shard> {
  const slot = await redisCli(shards[0]!.primary.port, 'cluster', 'keyslot', key);
  for (const shard of shards) {
    if (Number(await redisCli(shard.primary.port, 'cluster', 'countkeysinslot', slot)) > 0
      && await redisCli(shard.primary.port, 'exists', key) === '1') return shard;
  }
  throw new Error(`no primary holds ${key}`);
}
