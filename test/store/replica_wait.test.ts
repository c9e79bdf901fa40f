import { randomUUID } from 'node:crypto';

import { expect } from 'chai';
import { Cluster } from 'ioredis';

import { openStore } from '../../adapters/index.ts';
import { RedisKeys } from '../../adapters/redis/keys.ts';
import { keySlot } from '../../adapters/redis/replication.ts';
import { BackendUnavailableError, type Store } from '../../adapters/store.ts';
import { RefreshTokenRotations } from '../../src/engine/refresh_tokens.ts';
import { rawRedis, redisCli, startCluster, startReplicated, type Shard } from '../support/redis.ts';
import { eventually, sleep } from '../support/wait.ts';

const now = () => Math.floor(Date.now() / 1000);
// Generous: a replica on a busy test machine may take a while to acknowledge; refusals wait this long.
const WAIT = { replicas: 1, timeoutMs: 1000 };

/** Every kind of write the store acknowledges only once a replica holds it, each on records of its own. */
const DURABLE_WRITES: Array<[string, (store: Store) => Promise<unknown>]> = [
  ['model.upsert', (store) => store.model('RefreshToken').upsert(`rt-${randomUUID()}`, { grantId: 'g1' }, 60)],
  ['model.consume', (store) => store.model('AuthorizationCode').consume('code-1')],
  ['model.countUse', (store) => store.model('InitialAccessToken').countUse('iat-1', 5)],
  ['model.destroy', (store) => store.model('Session').destroy('session-1')],
  ['model.revokeByGrantId', (store) => store.model('AccessToken').revokeByGrantId('g1')],
  ['accounts.createWorkspace', (store) => store.accounts.createWorkspace({ id: `ws_${randomUUID()}`, name: 'Two', createdAt: 2 })],
  ['accounts.createUser', (store) => {
    const id = randomUUID();
    return store.accounts.createUser({ id, email: `${id}@example.com`, name: 'Bob', passwordHash: 'h', createdAt: 2 });
  }],
  ['accounts.putMembership', (store) => store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_1', role: 'viewer' })],
  ['settings.setIfAbsent', (store) => store.settings.setIfAbsent(`s-${randomUUID()}`, 'v')],
  ['settings.put', (store) => store.settings.put('k', 'w')],
  ['settings.compareAndSet', (store) => store.settings.compareAndSet('k', 'v', 'x')],
  ['revocations.add', (store) => store.revocations.add({ key: `grant:${randomUUID()}`, issuedBefore: now() + 60, expiresAt: now() + 60 })],
  ['records.create', (store) => store.records.create('ws_1', 'companies', { id: randomUUID(), createdAt: 'now', updatedAt: 'now', values: { name: 'Two' } })],
  ['records.update', (store) => store.records.update('ws_1', 'companies', 'r1', { city: 'Paris' }, 'now')],
  ['records.delete', (store) => store.records.delete('ws_1', 'companies', 'r1')],
  ['apiKeys.create', (store) => store.apiKeys.create({ id: randomUUID(), workspaceId: 'ws_1', name: 'k', digest: randomUUID(), hint: 'wsk_', createdAt: now() })],
  ['apiKeys.delete', (store) => store.apiKeys.delete('key-1')],
];

/** What the writes above change. */
async function seed(store: Store): Promise<void> {
  await store.model('AuthorizationCode').upsert('code-1', {}, 60);
  await store.model('InitialAccessToken').upsert('iat-1', {}, 60);
  await store.model('Session').upsert('session-1', { uid: 'uid-1' }, 60);
  await store.model('AccessToken').upsert('at-1', { grantId: 'g1' }, 60);
  await store.accounts.createWorkspace({ id: 'ws_1', name: 'One', createdAt: 1 });
  await store.accounts.createUser({ id: 'usr_1', email: 'ann@example.com', name: 'Ann', passwordHash: 'h', createdAt: 1 });
  await store.settings.put('k', 'v');
  await store.records.create('ws_1', 'companies', { id: 'r1', createdAt: 'then', updatedAt: 'then', values: { name: 'One' } });
  await store.apiKeys.create({ id: 'key-1', workspaceId: 'ws_1', name: 'k', digest: 'digest-1', hint: 'wsk_', createdAt: now() });
}

async function refusal(write: Promise<unknown>): Promise<unknown> {
  return write.then(() => undefined, (error: unknown) => error);
}

/** Until a write goes through again: the replica has caught up and the store has noticed. */
async function untilWritesGoThrough(store: Store, id: () => string): Promise<void> {
  await eventually('a write is acknowledged again', async () => await refusal(store.model('AccessToken').upsert(id(), {}, 60)) === undefined, 20_000, 100);
}

describe('redis store: writes wait for a replica (REDIS_WAIT_REPLICAS)', function () {
  this.timeout(120_000);

  describe('one primary and its replica', () => {
    let deployment: Awaited<ReturnType<typeof startReplicated>>;
    let store: Store;

    before(async () => {
      deployment = await startReplicated();
      store = openStore(deployment.url, { keyPrefix: 'wait:', replicaWait: WAIT });
      await seed(store);
    });

    after(async () => {
      await store?.close();
      await deployment?.stop();
    });

    it('refuses every write while the replica does not confirm, applies none after the first refusal, keeps answering reads, and takes writes again once the replica has caught up', async () => {
      const keys = new RedisKeys('wait:');
      deployment.replica.pause();
      try {
        // The first write after the replica stopped is refused once WAIT times out: it stays on the primary, unacknowledged.
        expect(await refusal(store.model('AccessToken').upsert('at-first', {}, 60))).to.be.instanceOf(BackendUnavailableError);

        for (const [name, write] of DURABLE_WRITES) expect(await refusal(write(store)), name).to.be.instanceOf(BackendUnavailableError);
        // Refused before being made: none of those writes is on the primary either.
        expect(await store.model('AuthorizationCode').find('code-1')).to.not.have.property('consumed');
        expect(await store.model('Session').find('session-1')).to.not.equal(undefined);
        expect(await store.model('AccessToken').find('at-1')).to.not.equal(undefined);
        expect(await store.settings.get('k')).to.equal('v');
        expect(await store.records.get('ws_1', 'companies', 'r1')).to.not.equal(undefined);
        expect(await store.apiKeys.get('key-1')).to.not.equal(undefined);
        expect(await redisCli(deployment.primary.port, 'exists', keys.record('AccessToken', 'at-refused'))).to.equal('0');
        expect(await refusal(store.model('AccessToken').upsert('at-refused', {}, 60))).to.be.instanceOf(BackendUnavailableError);
        expect(await redisCli(deployment.primary.port, 'exists', keys.record('AccessToken', 'at-refused'))).to.equal('0');

        // Reads, the revocation list's polling and rate limits do not wait for replicas.
        await store.ping();
        expect(await store.accounts.getUser('usr_1')).to.include({ email: 'ann@example.com' });
        expect((await store.revocations.changesSince(0)).entries).to.be.an('array');
        await store.rateLimiter({ name: 'wait-test', points: 5, duration: 60 }).consume('someone');
      } finally {
        deployment.replica.resume();
      }

      let attempt = 0;
      await untilWritesGoThrough(store, () => `at-after-${attempt += 1}`);
      for (const [name, write] of DURABLE_WRITES) {
        expect(await refusal(write(store)), name).to.equal(undefined);
      }
      // Acknowledged, so on the replica.
      expect(await redisCli(deployment.replica.port, 'hexists', keys.record('AuthorizationCode', 'code-1'), 'c')).to.equal('1');
    });
    it('a refresh token rotation whose successor the replica does not confirm leaves the consumed token redeemable, and its successor unstored; one that completes deletes it', async () => {
      const tokens = store.model('RefreshToken');
      const request = {};
      const rotations = new RefreshTokenRotations(tokens, () => request);
      const rotate = (successor: string) => rotations.store(successor, () => tokens.upsert(successor, { grantId: 'g-rotating' }, 60));
      await tokens.upsert('rt-presented', { grantId: 'g-rotating' }, 60);

      const claim = await tokens.consume('rt-presented');
      expect(claim).to.be.a('string');
      await rotations.consumed('rt-presented', claim!);
      deployment.replica.pause();
      try {
        expect(await refusal(rotate('rt-unconfirmed'))).to.be.instanceOf(BackendUnavailableError);
        expect(await tokens.find('rt-presented')).to.not.have.property('consumed');
        expect(await tokens.find('rt-unconfirmed')).to.equal(undefined);
      } finally {
        deployment.replica.resume();
      }

      let attempt = 0;
      await untilWritesGoThrough(store, () => `at-rotation-${attempt += 1}`);
      const again = await tokens.consume('rt-presented');
      expect(again).to.be.a('string');
      await rotations.consumed('rt-presented', again!);
      await rotate('rt-successor');
      await rotations.finish(request, true);
      expect(await tokens.find('rt-presented')).to.equal(undefined);
      expect(await tokens.find('rt-successor')).to.not.equal(undefined);
      expect(await tokens.consume('rt-presented')).to.equal(undefined);
    });

    it('a consumption the replica does not confirm is given back: the code or refresh token is redeemable once it has caught up', async () => {
      await store.model('AuthorizationCode').upsert('code-unconfirmed', {}, 60);
      let attempt = 0;
      await untilWritesGoThrough(store, () => `at-before-consume-${attempt += 1}`);
      deployment.replica.pause();
      try {
        expect(await refusal(store.model('AuthorizationCode').consume('code-unconfirmed'))).to.be.instanceOf(BackendUnavailableError);
        expect(await store.model('AuthorizationCode').find('code-unconfirmed')).to.not.have.property('consumed');
      } finally {
        deployment.replica.resume();
      }
      await untilWritesGoThrough(store, () => `at-after-consume-${attempt += 1}`);
      expect(await store.model('AuthorizationCode').consume('code-unconfirmed')).to.be.a('string');
      expect(await store.model('AuthorizationCode').consume('code-unconfirmed')).to.equal(undefined);
    });
  });

  describe('a failover to the replica', () => {
    let deployment: Awaited<ReturnType<typeof startReplicated>>;

    before(async () => {
      deployment = await startReplicated();
    });

    after(async () => {
      await deployment?.stop();
    });

    it('loses no acknowledged write: the replica lags, the primary is killed, the replica promoted holds every write and use the store acknowledged', async () => {
      const store = openStore(deployment.url, { keyPrefix: 'failover:', replicaWait: WAIT });
      const codes = Array.from({ length: 200 }, (_, i) => `code-${i}`);
      const acknowledged = { stored: [] as string[], consumed: [] as string[] };
      try {
        for (const code of codes) await store.model('AuthorizationCode').upsert(code, {}, 600);
        let stopped = false;
        let next = 0;
        const worker = async () => {
          while (!stopped) {
            const i = next;
            next += 1;
            const stored = `token-${i}`;
            if (await refusal(store.model('AccessToken').upsert(stored, {}, 600)) === undefined) acknowledged.stored.push(stored);
            const code = codes[i % codes.length]!;
            if (i < codes.length && await refusal(store.model('AuthorizationCode').consume(code)) === undefined) acknowledged.consumed.push(code);
          }
        };
        const workers = Array.from({ length: 8 }, worker);
        await eventually('writes acknowledged', () => acknowledged.stored.length >= 20, 10_000, 10);
        // The replica falls behind (frozen, and cut off: what its socket had buffered is all it will get), writes go on
        // against the primary, then the primary dies.
        deployment.replica.pause();
        await redisCli(deployment.primary.port, 'client', 'kill', 'type', 'replica');
        await sleep(WAIT.timeoutMs * 2);
        await deployment.primary.kill();
        stopped = true;
        await Promise.all(workers);
      } finally {
        deployment.replica.resume();
        await store.close();
      }

      await redisCli(deployment.replica.port, 'replicaof', 'no', 'one');
      const promoted = openStore(deployment.replica.url, { keyPrefix: 'failover:' });
      try {
        for (const id of acknowledged.stored) expect(await promoted.model('AccessToken').find(id), id).to.not.equal(undefined);
        for (const code of acknowledged.consumed) expect(await promoted.model('AuthorizationCode').find(code), code).to.have.property('consumed');
      } finally {
        await promoted.close();
      }
      expect(acknowledged.consumed.length).to.be.greaterThan(0);
    });
  });

  describe('a cluster of three primaries, each with a replica', () => {
    let deployment: Awaited<ReturnType<typeof startCluster>>;
    let store: Store;
    const keys = new RedisKeys('wait-cluster:');

    before(async () => {
      deployment = await startCluster(3, 1);
      store = openStore(deployment.url, { keyPrefix: 'wait-cluster:', replicaWait: WAIT });
    });

    after(async () => {
      await store?.close();
      await deployment?.stop();
    });

    /** An id whose key (made by `key`) the shard's primary holds. */
    async function idOn(shard: Shard, key: (id: string) => string): Promise<string> {
      const client = await rawRedis(deployment.url);
      try {
        const ranges = await (client as Cluster).cluster('SLOTS');
        const holds = (slot: number) => ranges.some(([first, last, primary]) => first <= slot && slot <= last && primary?.[1] === shard.primary.port);
        for (;;) {
          const id = randomUUID();
          if (holds(keySlot(key(id)))) return id;
        }
      } finally {
        client.disconnect();
      }
    }

    it('computes the slot of a key as the cluster does, hash tags included', async () => {
      for (const key of [keys.record('AccessToken', 'abc'), ...keys.revocations(), keys.apiKey('k1'), keys.dataRecord('ws_1', 'companies', 'r1'), 'a{}b', '{}x{y}', 'ünïcode']) {
        expect(keySlot(key), key).to.equal(Number(await redisCli(deployment.shards[0]!.primary.port, 'cluster', 'keyslot', key)));
      }
    });

    it('waits on the primary that holds each key written: a replica that does not confirm refuses the writes to its shard alone', async () => {
      const [frozen, ...others] = deployment.shards as [Shard, ...Shard[]];
      const recordOn = (shard: Shard) => idOn(shard, (id) => keys.record('AccessToken', id));
      const onFrozen = await recordOn(frozen);
      const onOthers = await Promise.all(others.map(recordOn));
      // A record on another shard, whose grant's index is on the frozen one: written to both, so waited for on both.
      const grantOnFrozen = await idOn(frozen, (id) => keys.grant('AccessToken', id));

      frozen.replicas[0]!.pause();
      try {
        expect(await refusal(store.model('AccessToken').upsert(onFrozen, {}, 60))).to.be.instanceOf(BackendUnavailableError);
        for (const id of onOthers) expect(await refusal(store.model('AccessToken').upsert(id, {}, 60)), id).to.equal(undefined);
        expect(await refusal(store.model('AccessToken').upsert(onOthers[0]!, { grantId: grantOnFrozen }, 60))).to.be.instanceOf(BackendUnavailableError);
        for (const id of onOthers) expect(await refusal(store.model('AccessToken').consume(id)), id).to.equal(undefined);
      } finally {
        frozen.replicas[0]!.resume();
      }
      await untilWritesGoThrough(store, () => onFrozen);
    });
  });
});
