import { expect } from 'chai';

import { api, createApiKey } from '../support/data_api.ts';
import { mixedLoad, newChain, type Chain, type TokenSet } from '../support/drill.ts';
import { codeRequest, exchangeCode, introspect, postCredentials, registerClient, revokeToken, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { sentinelMaster, startSentinel } from '../support/redis.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 23).toString('base64url');

/**
 * The failover drill: a Redis master, its one replica and three sentinels; two instances of the
 * service with REDIS_WAIT_REPLICAS=1 under steady mixed load; the master killed with SIGKILL. The
 * sentinels promote the replica and the instances follow it without a restart. While they cannot
 * write durably, every refusal is a 503 with Retry-After; once the old master is back (as the
 * new one's replica), writes go through again, and everything acknowledged before, during and
 * after is there, every chain keeps rotating (one whose rotation was refused or cut included),
 * and no refresh token is rotated twice.
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
    const apiKey = (await createApiKey(instances[0]!, user.workspaces[0]!.id)).key;
    // Requests alternate between the two instances.
    let turn = 0;
    const next = () => instances[(turn += 1) % instances.length]!;
    const refresh = (refreshToken: string, on = next()) => tokenRequest(on.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });

    const chains: Chain[] = [];
    for (let i = 0; i < 6; i += 1) {
      const on = next();
      const { url, verifier } = codeRequest(instances[0]!.issuer, client.client_id);
      // Each chain's own user agent: its own session, so its own grant. (The pages at the first instance: its URLs are the issuer's.)
      const callback = await authorize(new UserAgent(), url, instances[0]!.origin, { email: user.email, password: user.password });
      const response = await exchangeCode(on.issuer, client, callback.searchParams.get('code')!, verifier);
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
    const { unexpected, refusedAt, writtenAt, acknowledged } = load;
    const until = (what: string, probe: () => boolean | Promise<boolean>, timeoutMs: number) => eventually(what, probe, timeoutMs, 50).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${load.progress()}`);
    });
    await until('load acknowledged before the failover', () => load.rotations() >= 20 && acknowledged.revokedAccessTokens.length >= 3 && acknowledged.records.length >= 5, 30_000);

    settling.stopped = true;
    await until('the settled chains between two requests', () => settled.every((chain) => !chain.inFlight), 10_000);
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
    const restartedAt = Date.now();
    await until('every kind of write acknowledged again after the failover', () => {
      const after = (at: number) => at > restartedAt;
      return writtenAt.some(after) && chains.every((chain) => !chain.inDoubt)
        && acknowledged.records.length > 0 && acknowledged.revokedAccessTokens.length > 0 && refusedAt.every((at) => at < Date.now() - 1000);
    }, 90_000);
    const firstRefusal = refusedAt.find((at) => at > killedAt)!;
    const recoveredAt = writtenAt.find((at) => at > restartedAt)!;
    await load.stop();

    const seconds = (at: number) => `${((at - killedAt) / 1000).toFixed(1)} s`;
    process.stderr.write(`      failover drill (times after the kill): refusals from ${seconds(firstRefusal)}, replica promoted at ${seconds(promotedAt)}, `
      + `old master restarted at ${seconds(restartedAt)}, writes acknowledged again at ${seconds(recoveredAt)}; ${refusedAt.length} refusals, all 503; `
      + `${load.doubted()} of ${chains.length} chains refused or cut mid-rotation, every one rotating again\n`);
    expect(unexpected, 'answers during the drill').to.deep.equal([]);
    expect(refusedAt.length, 'refusals during the failover').to.be.greaterThan(0);

    // The last rotation of each settled chain, acknowledged just before the kill, survived it; every chain, refused or cut mid-rotation or not, rotates.
    for (const chain of settled) expect(chain.inDoubt, 'a settled chain').to.equal(false);
    for (const chain of chains) expect((await refresh(chain.refreshToken)).status).to.equal(200);
    for (const id of acknowledged.records) expect((await api(next(), `/rest/companies/${id}`, { credential: apiKey })).status, id).to.equal(200);
    for (const instance of instances) {
      await eventually('every acknowledged revocation holds on every instance', async () => {
        for (const token of acknowledged.revokedAccessTokens) {
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
