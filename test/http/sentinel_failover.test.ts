import { failoverDrill, startDeployment, type Deployment } from '../support/failover_drill.ts';
import { sentinelMaster, startSentinel } from '../support/redis.ts';
import { eventually } from '../support/wait.ts';

/**
 * The failover drill (test/support/failover_drill.ts) on a Redis master, its one replica and three
 * sentinels, two instances of the service with REDIS_WAIT_REPLICAS=1: the master killed with
 * SIGKILL. The sentinels promote the replica and the instances follow it without a restart.
 */
describe('Sentinel failover under load, writes waiting for a replica', function () {
  this.timeout(240_000);
  let sentinel: Awaited<ReturnType<typeof startSentinel>>;
  let deployment: Deployment;

  before(async () => {
    sentinel = await startSentinel(3, { replica: true });
    deployment = await startDeployment(sentinel.url, 'Failover Drill App');
  });

  after(async () => {
    for (const instance of deployment?.instances ?? []) await instance.stop();
    await sentinel?.stop();
  });

  it('answers 503 with Retry-After (never another 5xx) while the replica is promoted and until writes can wait for a replica again, then keeps every acknowledged write', async () => {
    await failoverDrill({
      name: 'sentinel failover drill',
      ...deployment,
      failOver: async () => {
        const oldMaster = `127.0.0.1:${sentinel.master.port}`;
        const killedAt = Date.now();
        await sentinel.master.kill();
        const promoted = await eventually('the sentinels promote the replica', async () => {
          const master = await sentinelMaster(sentinel.url);
          return master !== oldMaster && master;
        }, 60_000, 100);
        const promotedAt = Date.now();
        // The killed master comes back as the new one's replica, as an orchestrator would restart it.
        await sentinel.master.up(['--replicaof', ...promoted.split(':')]);
        return { killedAt, promotedAt, restartedAt: Date.now() };
      },
    });
  });
});
