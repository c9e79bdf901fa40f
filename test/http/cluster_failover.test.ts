import { storedId } from '../../src/engine/records_at_rest.ts';
import { failoverDrill, startDeployment, type Deployment } from '../support/failover_drill.ts';
import { redisCli, startCluster, type Shard } from '../support/redis.ts';
import { eventually } from '../support/wait.ts';

/**
 * The failover drill (test/support/failover_drill.ts) on a Redis Cluster of three primaries with
 * one replica each (cluster-node-timeout 2 s), two instances of the service with
 * REDIS_WAIT_REPLICAS=1: the primary that holds a settled chain's refresh token killed with
 * SIGKILL. Its replica takes its slots over by itself, as in production (no CLUSTER FAILOVER); the
 * instances follow without a restart. Writes to that shard are refused (503 with Retry-After)
 * until its new primary has a replica again: the old one, restarted on its directory, rejoins as that.
 */
describe('Redis Cluster failover under load, writes waiting for a replica', function () {
  this.timeout(240_000);
  let cluster: Awaited<ReturnType<typeof startCluster>>;
  let deployment: Deployment;

  before(async () => {
    cluster = await startCluster(3, 1);
    deployment = await startDeployment(cluster.url, 'Cluster Drill App');
  });

  after(async () => {
    for (const instance of deployment?.instances ?? []) await instance.stop();
    await cluster?.stop();
  });

  it('answers 503 with Retry-After (never another 5xx) while a replica takes over a killed primary\'s slots and until it has a replica again, then keeps every acknowledged write', async () => {
    await failoverDrill({
      name: 'cluster failover drill',
      ...deployment,
      failOver: async (settled) => {
        // The primary holding the record of a settled chain's refresh token: that token must survive its primary's death.
        const victim = await primaryHolding(cluster.shards, `oauth:m:RefreshToken:${storedId('RefreshToken', settled[0]!.refreshToken)}`);
        const replica = victim.replicas[0]!;
        const killedAt = Date.now();
        await victim.primary.kill();
        await eventually('the replica takes over the killed primary\'s slots', async () => /^role:master/m.test(await redisCli(replica.port, 'info', 'replication')), 60_000, 100);
        const promotedAt = Date.now();
        // The killed primary comes back on its directory (its nodes.conf), as an orchestrator would restart it, and rejoins as the new primary's replica.
        await victim.primary.up();
        return { killedAt, promotedAt, restartedAt: Date.now() };
      },
    });
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
