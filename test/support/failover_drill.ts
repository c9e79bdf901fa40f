import { randomBytes } from 'node:crypto';

import { expect } from 'chai';

import { api, createApiKey } from './data_api.ts';
import { drillClient, expectNoReplay, openChains, serviceLoad, type Chain } from './drill.ts';
import { introspect, postCredentials, registerClient, type RegisteredClient } from './oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from './server.ts';
import { eventually } from './wait.ts';

/** What a failover drill runs against. */
export interface Deployment {
  /** Instances of the service behind one issuer, writes waiting for a replica. */
  instances: TestServer[];
  client: RegisteredClient;
  user: SeededUser;
}

/**
 * Two instances of the service on the Redis at `store`, behind one load balancer (one issuer, each
 * instance on its own port), every write waiting for a replica (REDIS_WAIT_REPLICAS=1); a user,
 * and a client registered as `clientName`.
 */
export async function startDeployment(store: string, clientName: string): Promise<Deployment> {
  const env = { KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64url'), REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT: '1s', RATE_LIMITS: 'off' };
  const instances = [await startServer({ store, env })];
  try {
    instances.push(await startServer({ store, env: { ...env, BASE_URL: instances[0]!.issuer } }));
    return { instances, user: await seedUser(instances[0]!), client: await registerClient(instances[0]!.issuer, { client_name: clientName }) };
  } catch (error) {
    for (const instance of instances) await instance.stop();
    throw error;
  }
}

/** When the failover's steps happened (Date.now()). */
export interface Failover {
  killedAt: number;
  /** A replica took the killed primary's place. */
  promotedAt: number;
  /** The killed primary was started again, as the new primary's replica. */
  restartedAt: number;
}

export interface FailoverDrillOptions extends Deployment {
  /** What the drill's log line calls it. */
  name: string;
  /**
   * Kills a primary and brings the store back: a replica promoted, the killed primary restarted
   * as its replica. Called with the settled chains, whose last rotation must survive the kill.
   */
  failOver: (settled: Chain[]) => Promise<Failover>;
}

/**
 * The failover drill under steady mixed load, across the instances: half the chains rotate through
 * the failover, the other half settle just before it, their last rotation acknowledged. While the
 * store cannot write durably, every refusal is a 503 with Retry-After; once the killed primary is
 * back as a replica, writes go through again, and everything acknowledged before, during and
 * after is there, every chain keeps rotating (one whose rotation was refused or cut included),
 * and no refresh token is rotated twice.
 */
export async function failoverDrill({ name, instances, client, user, failOver }: FailoverDrillOptions): Promise<void> {
  const apiKey = (await createApiKey(instances[0]!, user.workspaces[0]!.id)).key;
  const drill = drillClient(instances, client);
  const chains = await openChains(6, { instances, client, user, next: drill.next });

  const settled = chains.slice(3);
  const settling = { stopped: false };
  const load = serviceLoad({ chains, drill, client, apiKey, paused: (chain) => settled.includes(chain) && settling.stopped });
  await load.until('load acknowledged before the failover', () => load.rotations() >= 20 && load.acknowledged.revokedAccessTokens.length >= 3 && load.acknowledged.records.length >= 5, 30_000);

  settling.stopped = true;
  await load.until('the settled chains between two requests', () => settled.every((chain) => !chain.inFlight), 10_000);
  const { killedAt, promotedAt, restartedAt } = await failOver(settled);
  await load.until('every kind of write acknowledged again after the failover', () => {
    const after = (at: number) => at > restartedAt;
    return load.writtenAt.some(after) && chains.every((chain) => !chain.inDoubt)
      && load.acknowledged.records.length > 0 && load.acknowledged.revokedAccessTokens.length > 0 && load.refusedAt.every((at) => at < Date.now() - 1000);
  }, 90_000);
  const firstRefusal = load.refusedAt.find((at) => at > killedAt);
  const lastRefusal = load.refusedAt.at(-1);
  const recoveredAt = load.writtenAt.find((at) => at > (lastRefusal ?? killedAt));
  await load.stop();

  const seconds = (at: number | undefined) => (at === undefined ? 'never' : `${((at - killedAt) / 1000).toFixed(1)} s`);
  console.log(`      ${name} (times after the kill): refusals from ${seconds(firstRefusal)} to ${seconds(lastRefusal)}, `
    + `replica promoted at ${seconds(promotedAt)}, old primary restarted at ${seconds(restartedAt)}, writes acknowledged again from ${seconds(recoveredAt)}; `
    + `${load.refusedAt.length} refusals, all 503; ${load.doubted()} of ${chains.length} chains refused or cut mid-rotation, every one rotating again`);
  expect(load.unexpected, 'answers during the drill').to.deep.equal([]);
  expect(load.refusedAt.length, 'refusals during the failover').to.be.greaterThan(0);

  // The last rotation of each settled chain, acknowledged just before the kill, survived it; every chain, refused or cut mid-rotation or not, rotates.
  for (const chain of settled) expect(chain.inDoubt, 'a settled chain').to.equal(false);
  for (const chain of chains) expect((await drill.refresh(chain.refreshToken)).status).to.equal(200);
  for (const id of load.acknowledged.records) expect((await api(drill.next(), `/rest/companies/${id}`, { credential: apiKey })).status, id).to.equal(200);
  for (const instance of instances) {
    await eventually('every acknowledged revocation holds on every instance', async () => {
      for (const token of load.acknowledged.revokedAccessTokens) {
        if ((await introspect(instance.issuer, postCredentials(client), token)).active !== false) return false;
      }
      return true;
    }, 10_000, 250);
  }
  await expectNoReplay(chains, drill.refresh);
}
