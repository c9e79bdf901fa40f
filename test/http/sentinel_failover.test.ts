import { failoverDrill } from '../support/failover_drill.ts';
import { registerClient, type RegisteredClient } from '../support/oauth.ts';
import { sentinelMaster, startSentinel } from '../support/redis.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { eventually } from '../support/wait.ts';

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 23).toString('base64url');

/**
 * The failover drill (test/support/failover_drill.ts) on a Redis master, its one replica and three
 * sentinels, two instances of the service with REDIS_WAIT_REPLICAS=1: the master killed with
 * SIGKILL. The sentinels promote the replica and the instances follow it without a restart.
 */
describe('Sentinel failover under load, writes waiting for a replica', function () {
  this.timeout(240_000);
  let sentinel: Awaited<ReturnType<typeof startSentinel>>;
  let instances: TestServer[];
  let user: SeededUser;
  let client: RegisteredClient;

  before(async () => {
    sentinel = await startSentinel(3, { replica: true });
    const env = { KEY_ENCRYPTION_KEY, REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT: '1s', RATE_LIMITS: 'off' };
    instances = [await startServer({ store: sentinel.url, env })];
    // Behind one load balancer: one issuer, each instance on its own port.
    instances.push(await startServer({ store: sentinel.url, env: { ...env, BASE_URL: instances[0]!.issuer } }));
    user = await seedUser(instances[0]!);
    client = await registerClient(instances[0]!.issuer, { client_name: 'Failover Drill App' });
  });

  after(async () => {
    for (const instance of instances ?? []) await instance.stop();
    await sentinel?.stop();
  });

  it('answers 503 with Retry-After (never another 5xx) while the replica is promoted and until writes can wait for a replica again, then keeps every acknowledged write', async () => {
    await failoverDrill({
      name: 'sentinel failover drill',
      instances,
      client,
      user,
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
