import { randomUUID } from 'node:crypto';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import { BackendUnavailableError, DuplicateError, type Store } from '../../adapters/store.ts';
import { redisCli, startRedis, type RedisServer } from '../support/redis.ts';

/** Every operation of the store, each on records of its own. */
const OPERATIONS: Array<[string, (store: Store) => Promise<unknown>]> = [
  ['ping', (store) => store.ping()],
  ['model.upsert', (store) => store.model('AccessToken').upsert('a2', { grantId: 'g1' }, 60)],
  ['model.find', (store) => store.model('AccessToken').find('a1')],
  ['model.findByUid', (store) => store.model('Session').findByUid('uid-1')],
  ['model.findByUserCode', (store) => store.model('DeviceCode').findByUserCode('CODE-1')],
  ['model.consume', (store) => store.model('AuthorizationCode').consume('c1')],
  ['model.countUse', (store) => store.model('InitialAccessToken').countUse('i1', 2)],
  ['model.destroy', (store) => store.model('Session').destroy('s1')],
  ['model.revokeByGrantId', (store) => store.model('AccessToken').revokeByGrantId('g1')],
  ['model.list', (store) => store.model('Client').list()],
  ['model.listBy', (store) => store.model('Grant').listBy('usr_1')],
  ['accounts.createWorkspace', (store) => store.accounts.createWorkspace({ id: `ws_${randomUUID()}`, name: 'Two', createdAt: 2 })],
  ['accounts.getWorkspace', (store) => store.accounts.getWorkspace('ws_1')],
  ['accounts.listWorkspaces', (store) => store.accounts.listWorkspaces()],
  ['accounts.createUser', (store) => {
    const id = randomUUID();
    return store.accounts.createUser({ id, email: `${id}@example.com`, name: 'Bob', passwordHash: 'h', createdAt: 2 });
  }],
  ['accounts.getUser', (store) => store.accounts.getUser('usr_1')],
  ['accounts.findUserByEmail', (store) => store.accounts.findUserByEmail('ann@example.com')],
  ['accounts.countUsers', (store) => store.accounts.countUsers()],
  ['accounts.putMembership', (store) => store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_1', role: 'viewer' })],
  ['accounts.getMembership', (store) => store.accounts.getMembership('usr_1', 'ws_1')],
  ['accounts.listMemberships', (store) => store.accounts.listMemberships('usr_1')],
  ['settings.get', (store) => store.settings.get('k')],
  ['settings.setIfAbsent', (store) => store.settings.setIfAbsent('k2', 'v')],
  ['settings.put', (store) => store.settings.put('k', 'w')],
  ['settings.compareAndSet', (store) => store.settings.compareAndSet('k', 'w', 'x')],
  ['revocations.add', (store) => store.revocations.add({ key: 'grant:g2', issuedBefore: now() + 60, expiresAt: now() + 60 })],
  ['revocations.changesSince', (store) => store.revocations.changesSince(0)],
  ['records.create', (store) => store.records.create('ws_1', 'companies', { id: randomUUID(), createdAt: 'now', updatedAt: 'now', values: { name: 'Two' } })],
  ['records.get', (store) => store.records.get('ws_1', 'companies', 'r1')],
  ['records.existing', (store) => store.records.existing('ws_1', 'companies', ['r1'])],
  ['records.list', (store) => store.records.list('ws_1', 'companies', 0, 10)],
  ['records.update', (store) => store.records.update('ws_1', 'companies', 'r1', { city: 'Paris' }, 'now')],
  ['records.delete', (store) => store.records.delete('ws_1', 'companies', 'r2')],
  ['apiKeys.create', (store) => store.apiKeys.create({ id: randomUUID(), workspaceId: 'ws_1', name: 'k', digest: randomUUID(), hint: 'wsk_', createdAt: now() })],
  ['apiKeys.findByDigest', (store) => store.apiKeys.findByDigest('digest-1')],
  ['apiKeys.get', (store) => store.apiKeys.get('key-1')],
  ['apiKeys.list', (store) => store.apiKeys.list('ws_1')],
  ['apiKeys.delete', (store) => store.apiKeys.delete('key-2')],
  ['apiKeys.touch', (store) => store.apiKeys.touch('key-1', now())],
];

const now = () => Math.floor(Date.now() / 1000);

/** What the operations above read: written afresh after each restart, since the test server keeps nothing. */
async function seed(store: Store): Promise<void> {
  const unlessThere = (error: unknown) => {
    if (!(error instanceof DuplicateError)) throw error;
  };
  await store.model('AccessToken').upsert('a1', { grantId: 'g1' }, 60);
  await store.model('Session').upsert('s1', { uid: 'uid-1' }, 60);
  await store.model('DeviceCode').upsert('d1', { userCode: 'CODE-1' }, 60);
  await store.model('AuthorizationCode').upsert('c1', {}, 60);
  await store.model('Client').upsert('client-1', { client_id: 'client-1' }, undefined);
  await store.accounts.createWorkspace({ id: 'ws_1', name: 'One', createdAt: 1 }).catch(unlessThere);
  await store.accounts.createUser({ id: 'usr_1', email: 'ann@example.com', name: 'Ann', passwordHash: 'h', createdAt: 1 }).catch(unlessThere);
  await store.settings.put('k', 'v');
  await store.records.create('ws_1', 'companies', { id: 'r1', createdAt: 'then', updatedAt: 'then', values: { name: 'One' } }).catch(unlessThere);
  await store.apiKeys.create({ id: 'key-1', workspaceId: 'ws_1', name: 'k', digest: 'digest-1', hint: 'wsk_', createdAt: now() }).catch(unlessThere);
}

/** Runs every operation at once; each must reject with BackendUnavailableError within 2 s. */
async function expectEveryOperationUnavailable(store: Store): Promise<void> {
  const outcomes = await Promise.all(OPERATIONS.map(async ([name, operation]) => {
    const started = Date.now();
    try {
      await operation(store);
      return { name, error: undefined as unknown, ms: Date.now() - started };
    } catch (error) {
      return { name, error, ms: Date.now() - started };
    }
  }));
  for (const { name, error, ms } of outcomes) {
    expect(error, name).to.be.instanceOf(BackendUnavailableError);
    expect(ms, `${name} took ${ms} ms`).to.be.below(2000);
  }
}

async function expectEveryOperationWorks(store: Store): Promise<void> {
  await seed(store);
  for (const [name, operation] of OPERATIONS) {
    try {
      await operation(store);
    } catch (error) {
      expect.fail(`${name} failed after recovery: ${String(error)}`);
    }
  }
  expect((await store.accounts.getUser('usr_1'))?.email).to.equal('ann@example.com');
}

/** Until the store answers again (ioredis reconnects on its own, backing off to once a second). */
async function untilAnswering(store: Store): Promise<void> {
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      await store.ping();
      return;
    } catch (error) {
      expect(error).to.be.instanceOf(BackendUnavailableError);
      if (Date.now() > deadline) throw error;
    }
  }
}

describe('redis store outage', function () {
  this.timeout(60_000);
  let redis: RedisServer;
  let store: Store;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => { unhandled.push(reason); };

  before(async () => {
    process.on('unhandledRejection', onUnhandled);
    redis = await startRedis();
    store = openStore(redis.url, { keyPrefix: 'outage:' });
    await seed(store);
  });

  after(async () => {
    process.off('unhandledRejection', onUnhandled);
    await store?.close();
    await redis?.stop();
  });

  afterEach(() => {
    expect(unhandled).to.deep.equal([]);
  });

  it('fails every operation fast while redis-server is stopped, and works again on the same store once it is back', async () => {
    // Writes in flight when the server goes away settle either way, none hangs.
    const inFlight = Array.from({ length: 50 }, (_, i) => store.model('RefreshToken').upsert(`r${i}`, { grantId: 'g1' }, 60).then(() => undefined, (error: unknown) => error));
    const stoppedAt = Date.now();
    await redis.down();
    for (const outcome of await Promise.all(inFlight)) {
      if (outcome !== undefined) expect(outcome).to.be.instanceOf(BackendUnavailableError);
    }
    expect(Date.now() - stoppedAt).to.be.below(5000);

    await expectEveryOperationUnavailable(store);
    await expectEveryOperationUnavailable(store);

    await redis.up();
    await untilAnswering(store);
    await expectEveryOperationWorks(store);
  });

  it('fails every operation within 2 s while redis-server is frozen (connected, not answering), and recovers when it resumes', async () => {
    redis.pause();
    try {
      await expectEveryOperationUnavailable(store);
    } finally {
      redis.resume();
    }
    await untilAnswering(store);
    await expectEveryOperationWorks(store);
  });

  it('refuses what Redis refuses while out of memory (maxmemory below its use, noeviction) as the store unavailable, transactions included, and works again once it has room', async () => {
    await redisCli(redis.port, 'CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    await redisCli(redis.port, 'CONFIG', 'SET', 'maxmemory', '1');
    try {
      const refused: string[] = [];
      for (const [name, operation] of OPERATIONS) {
        try {
          await operation(store);
        } catch (error) {
          // A read Redis still serves succeeds; whatever it refuses is unavailable, never a bug (a 500).
          expect(error, `${name}: ${String(error)}`).to.be.instanceOf(BackendUnavailableError);
          refused.push(name);
        }
      }
      expect(refused, 'a write refused').to.include('records.create');
      expect(refused, 'a read made in a transaction refused').to.include('records.list');
    } finally {
      await redisCli(redis.port, 'CONFIG', 'SET', 'maxmemory', '0');
    }
    await expectEveryOperationWorks(store);
  });

  it('fails fast when opened while Redis is unreachable, and connects once it is there', async () => {
    await redis.down();
    const late = openStore(redis.url, { keyPrefix: 'outage-late:' });
    try {
      await expectEveryOperationUnavailable(late);
      await redis.up();
      await untilAnswering(late);
      await expectEveryOperationWorks(late);
    } finally {
      await late.close();
    }
  });
});
