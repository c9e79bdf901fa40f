import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';
import { RateLimiterRes } from 'rate-limiter-flexible';

import { openStore, type OpenStoreOptions } from '../../adapters/index.ts';
import { RedisKeys } from '../../adapters/redis/keys.ts';
import { SqliteConnection } from '../../adapters/sqlite/connection.ts';
import { MODELS_SCHEMA, SqliteModelStore } from '../../adapters/sqlite/models.ts';
import { BackendUnavailableError, DuplicateError, LastAdminError, type ApiKeyRecord, type Store } from '../../adapters/store.ts';
import { keysUnder, rawRedis, startCluster, startRedis, startReplicated, startSentinel, type RedisDeployment } from '../support/redis.ts';
import { sleep } from '../support/wait.ts';

interface Backend {
  name: string;
  /** The storage URL and options of this backend's store for one test, given the test's fresh directory. */
  target(dir: string): { url: string; options?: OpenStoreOptions };
  /** Whether stores opened on one directory share their data (`memory:` is private to each store). */
  shared: boolean;
  /** Redis: keys can be inspected with keysUnder(url, prefix). */
  redis?: boolean;
  start?(): Promise<void>;
  stop?(): Promise<void>;
}

/** A Redis deployment started for its describe block; each test writes under a key prefix of its own. */
function redisBackend(name: string, start: () => Promise<RedisDeployment>, options: OpenStoreOptions = {}): Backend {
  let deployment: RedisDeployment | undefined;
  return {
    name,
    shared: true,
    redis: true,
    target: (dir) => ({ url: deployment!.url, options: { ...options, keyPrefix: `test:${basename(dir)}:` } }),
    start: async () => { deployment = await start(); },
    stop: async () => { await deployment?.stop(); },
  };
}

/**
 * The contract every storage backend passes.
 */
const BACKENDS: Backend[] = [
  { name: 'sqlite file', target: (dir) => ({ url: `sqlite:${join(dir, 'contract.sqlite')}` }), shared: true },
  { name: 'memory', target: () => ({ url: 'memory:' }), shared: false },
  redisBackend('redis', () => startRedis()),
  redisBackend('redis sentinel', () => startSentinel()),
  redisBackend('redis cluster', () => startCluster()),
  // Every write followed by a WAIT (REDIS_WAIT_REPLICAS), on one server and on each primary of a cluster.
  redisBackend('redis, writes wait for a replica', () => startReplicated(), { replicaWait: { replicas: 1, timeoutMs: 2000 } }),
  redisBackend('redis cluster with replicas, writes wait for one', () => startCluster(3, 1), { replicaWait: { replicas: 1, timeoutMs: 2000 } }),
  { name: 'sqlite file, synchronous full', target: (dir) => ({ url: `sqlite:${join(dir, 'contract.sqlite')}`, options: { sqliteSynchronous: 'full' } }), shared: true },
];

const open = (backend: Backend, dir: string) => {
  const { url, options } = backend.target(dir);
  return openStore(url, options);
};

for (const backend of BACKENDS) {
  describe(`store contract: ${backend.name}`, () => {
    let dir: string;
    let store: Store;

    before(async function () {
      this.timeout(60_000);
      await backend.start?.();
    });

    after(async () => {
      await backend.stop?.();
    });

    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), 'store-'));
      store = open(backend, dir);
    });

    afterEach(async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    });

    describe('engine models', () => {
      it('finds what it stored, and nothing under another model name', async () => {
        await store.model('AccessToken').upsert('a1', { jti: 'a1', grantId: 'g1' }, 60);
        expect(await store.model('AccessToken').find('a1')).to.deep.equal({ jti: 'a1', grantId: 'g1' });
        expect(await store.model('RefreshToken').find('a1')).to.equal(undefined);
      });

      it('takes fifty writes at once from a store just opened: each is kept, and no listener leak is reported while its connections are made', async () => {
        const warnings: string[] = [];
        const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
        process.on('warning', onWarning);
        try {
          const ids = Array.from({ length: 50 }, (_, i) => `burst-${i}`);
          await Promise.all(ids.map((id) => store.model('Session').upsert(id, { uid: id }, 60)));
          expect(await Promise.all(ids.map((id) => store.model('Session').findByUid(id)))).to.deep.equal(ids.map((id) => ({ uid: id })));
          await new Promise((resolve) => setImmediate(resolve));
        } finally {
          process.off('warning', onWarning);
        }
        expect(warnings).to.deep.equal([]);
      });

      it('replaces a record on upsert', async () => {
        const model = store.model('Session');
        await model.upsert('s1', { uid: 'u1', accountId: 'x' }, 60);
        await model.upsert('s1', { uid: 'u1', accountId: 'y' }, 60);
        expect(await model.find('s1')).to.deep.equal({ uid: 'u1', accountId: 'y' });
      });

      it('finds by uid and by user code', async () => {
        await store.model('Session').upsert('s1', { uid: 'uid-1' }, 60);
        await store.model('DeviceCode').upsert('d1', { userCode: 'ABCD-EFGH' }, 60);
        expect(await store.model('Session').findByUid('uid-1')).to.deep.equal({ uid: 'uid-1' });
        expect(await store.model('DeviceCode').findByUserCode('ABCD-EFGH')).to.deep.equal({ userCode: 'ABCD-EFGH' });
        expect(await store.model('Session').findByUid('nope')).to.equal(undefined);
      });

      it('keeps records without a lifetime (clients) until destroyed', async () => {
        await store.model('Client').upsert('client-1', { client_id: 'client-1' }, undefined);
        expect(await store.model('Client').list()).to.deep.equal([{ id: 'client-1', payload: { client_id: 'client-1' } }]);
        await store.model('Client').destroy('client-1');
        expect(await store.model('Client').find('client-1')).to.equal(undefined);
      });

      it('consumes once: exactly one of many concurrent consumers wins', async () => {
        const model = store.model('AuthorizationCode');
        await model.upsert('c1', { jti: 'c1' }, 60);
        const results = await Promise.all(Array.from({ length: 10 }, () => model.consume('c1')));
        expect(results.filter(Boolean)).to.have.length(1);
        const found = await model.find('c1');
        expect(found?.consumed).to.be.a('number');
        expect(await model.consume('missing')).to.equal(undefined);
      });

      it('gives a consumption back under its claim only: the record is consumable again, by one caller; discards a record', async () => {
        const model = store.model('RefreshToken');
        await model.upsert('rt-given-back', { jti: 'rt-given-back', grantId: 'g-given-back' }, 60);
        const claim = await model.consume('rt-given-back');
        expect(claim).to.be.a('string');
        await model.release('rt-given-back', 'another claim');
        expect(await model.find('rt-given-back'), 'released under another claim').to.have.property('consumed');
        await model.release('rt-given-back', claim!);
        expect(await model.find('rt-given-back')).to.not.have.property('consumed');
        const results = await Promise.all(Array.from({ length: 5 }, () => model.consume('rt-given-back')));
        expect(results.filter(Boolean)).to.have.length(1);
        await model.release('missing', claim!);
        expect(await model.find('missing')).to.equal(undefined);

        await model.upsert('rt-discarded', { jti: 'rt-discarded', grantId: 'g-given-back' }, 60);
        await model.discard('rt-discarded');
        expect(await model.find('rt-discarded')).to.equal(undefined);
        await model.revokeByGrantId('g-given-back');
        expect(await model.find('rt-given-back')).to.equal(undefined);
      });

      it('completes a consumption under its claim only: the record is deleted, and only then', async () => {
        const model = store.model('RefreshToken');
        await model.upsert('rt-completed', { jti: 'rt-completed', grantId: 'g-completed' }, 60);
        expect(await model.complete('rt-completed', 'no claim yet'), 'not consumed').to.equal('unclaimed');
        const claim = await model.consume('rt-completed');
        expect(await model.complete('rt-completed', 'another claim')).to.equal('unclaimed');
        expect(await model.completionOf('rt-completed', claim!)).to.equal('pending');
        expect(await model.find('rt-completed')).to.have.property('consumed');
        expect(await model.complete('rt-completed', claim!)).to.equal('completed');
        expect(await model.find('rt-completed')).to.equal(undefined);
        expect(await model.consume('rt-completed')).to.equal(undefined);
        expect(await model.complete('rt-never-stored', 'a claim')).to.equal('gone');
      });

      it('leaves a completion\'s mark that only its own claim finds: completing again is completed, for another claim unclaimed, and nothing else sees it', async () => {
        const model = store.model('RefreshToken');
        await model.upsert('rt-marked', { jti: 'rt-marked', grantId: 'g-marked', uid: 'uid-marked' }, 60);
        const claim = await model.consume('rt-marked');
        expect(await model.complete('rt-marked', claim!)).to.equal('completed');
        // A completion tried again (its first answer lost), or read, finds it was its own.
        expect(await model.complete('rt-marked', claim!)).to.equal('completed');
        expect(await model.completionOf('rt-marked', claim!)).to.equal('completed');
        expect(await model.complete('rt-marked', 'another claim')).to.equal('unclaimed');
        expect(await model.completionOf('rt-marked', 'another claim')).to.equal('unclaimed');
        // The mark is no record: not found, not consumable, not counted, not listed by its grant's revocation, keeping nothing of the payload.
        expect(await model.find('rt-marked')).to.equal(undefined);
        expect(await model.findByUid('uid-marked')).to.equal(undefined);
        expect(await model.consume('rt-marked', Math.floor(Date.now() / 1000) + 60)).to.equal(undefined);
        expect(await model.countUse('rt-marked', 5)).to.equal(0);
        await model.revokeByGrantId('g-marked');
        expect(await model.complete('rt-marked', claim!)).to.equal('completed');
        expect(await model.completionOf('rt-never-stored', claim!)).to.equal('gone');
        // Once its caller knows, the mark goes: by its own claim only.
        await model.forgetCompletion('rt-marked', 'another claim');
        expect(await model.completionOf('rt-marked', claim!)).to.equal('completed');
        await model.forgetCompletion('rt-marked', claim!);
        expect(await model.completionOf('rt-marked', claim!)).to.equal('gone');
      });

      it('takes an abandoned consumption over, by exactly one caller, and then only the new claim counts', async () => {
        const model = store.model('RefreshToken');
        await model.upsert('rt-abandoned', { jti: 'rt-abandoned', grantId: 'g-abandoned' }, 60);
        const abandoned = await model.consume('rt-abandoned');
        const { consumed } = await model.find('rt-abandoned') as { consumed: number };
        expect(await model.consume('rt-abandoned', consumed - 1), 'consumed after the cut-off: still under way').to.equal(undefined);
        // Taken over in a later second than the abandoned consumption's, as a real cut-off is far later still.
        while (Math.floor(Date.now() / 1000) <= consumed) await new Promise((resolve) => setTimeout(resolve, 50));
        const takers = await Promise.all(Array.from({ length: 5 }, () => model.consume('rt-abandoned', consumed)));
        const taken = takers.filter((claim) => claim !== undefined);
        expect(taken).to.have.length(1);
        expect(taken[0]).to.not.equal(abandoned);

        // The abandoned request, should it resume, can neither give back nor complete what was taken over.
        await model.release('rt-abandoned', abandoned!);
        expect(await model.complete('rt-abandoned', abandoned!)).to.equal('unclaimed');
        expect(await model.find('rt-abandoned')).to.have.property('consumed');
        expect(await model.complete('rt-abandoned', taken[0]!)).to.equal('completed');
        expect(await model.find('rt-abandoned')).to.equal(undefined);
        expect(await model.complete('rt-abandoned', abandoned!), 'completed under the other claim').to.equal('unclaimed');
        expect(await model.completionOf('rt-abandoned', abandoned!)).to.equal('unclaimed');
      });

      it('stores a single-use marker once: exactly one of many concurrent callers, never over a live one', async () => {
        const markers = store.model('ReplayDetection');
        const results = await Promise.all(Array.from({ length: 10 }, () => markers.insertNew('jti-1', { iss: 'client-1' }, 60)));
        expect(results.filter(Boolean)).to.have.length(1);
        expect(await markers.find('jti-1')).to.deep.equal({ iss: 'client-1' });
        expect(await markers.insertNew('jti-1', { iss: 'client-2' }, 60), 'again').to.equal(false);
        expect(await markers.find('jti-1'), 'the first kept').to.deep.equal({ iss: 'client-1' });
        expect(await markers.insertNew('jti-2', { iss: 'client-1' }, 60), 'another id').to.equal(true);
      });

      it('counts uses up to a limit: never more than the limit, however many callers race', async () => {
        const model = store.model('InitialAccessToken');
        await model.upsert('t1', { kind: 'InitialAccessToken' }, 60);
        const results = await Promise.all(Array.from({ length: 10 }, () => model.countUse('t1', 3)));
        expect(results.filter((uses) => uses > 0).sort()).to.deep.equal([1, 2, 3]);
        expect(results.filter((uses) => uses === 0)).to.have.length(7);
        expect(await model.countUse('t1', 3), 'used up').to.equal(0);
        expect(await model.countUse('t1', 4), 'a higher limit counts on from the uses so far').to.equal(4);
        expect(await model.find('t1'), 'the record itself is unchanged').to.deep.equal({ kind: 'InitialAccessToken' });
        expect(await model.countUse('missing', 1)).to.equal(0);
        expect(await model.find('missing'), 'counting a missing record creates nothing').to.equal(undefined);

        await model.upsert('t1', { kind: 'InitialAccessToken' }, 60);
        expect(await model.countUse('t1', 1), 'an upsert starts the count again').to.equal(1);
        expect(await model.countUse('t1', 1)).to.equal(0);
        await model.destroy('t1');
        expect(await model.countUse('t1', 5), 'destroyed').to.equal(0);
      });

      // A memory store is private to its process: there is no second store to race.
      if (backend.shared) it('consumes once across separately opened stores: exactly one of several processes wins each record', async function () {
        this.timeout(60_000);
        const ids = Array.from({ length: 10 }, (_, i) => `c${i}`);
        for (const id of ids) await store.model('AuthorizationCode').upsert(id, { jti: id }, 60);
        await store.committed();
        const { url, options } = backend.target(dir);
        const results = await consumeInProcesses(4, url, options?.keyPrefix ?? '', 'AuthorizationCode', ids);
        for (const [i, id] of ids.entries()) expect(results.filter((result) => result[i]), id).to.have.length(1);
      });

      if (backend.shared) it('counts uses across separately opened stores: at most the limit over several processes', async function () {
        this.timeout(60_000);
        const ids = ['t0', 't1', 't2'];
        for (const id of ids) await store.model('InitialAccessToken').upsert(id, { kind: 'InitialAccessToken' }, 60);
        await store.committed();
        const { url, options } = backend.target(dir);
        const results = await consumeInProcesses(4, url, options?.keyPrefix ?? '', 'InitialAccessToken', ids, 2);
        for (const [i, id] of ids.entries()) {
          expect(results.map((result) => Number(result[i])).filter((uses) => uses > 0).sort(), id).to.deep.equal([1, 2]);
        }
      });

      it('forgets a destroyed record\'s uid and user code, and keeps a lookup another record has taken since', async () => {
        await store.model('Session').upsert('s1', { uid: 'uid-1' }, 60);
        await store.model('DeviceCode').upsert('d1', { userCode: 'CODE-1' }, 60);
        await store.model('Session').destroy('s1');
        await store.model('DeviceCode').destroy('d1');
        expect(await store.model('Session').findByUid('uid-1')).to.equal(undefined);
        expect(await store.model('DeviceCode').findByUserCode('CODE-1')).to.equal(undefined);

        await store.model('Session').upsert('s2', { uid: 'uid-2' }, 60);
        await store.model('Session').upsert('s3', { uid: 'uid-2' }, 60);
        await store.model('Session').destroy('s2');
        expect(await store.model('Session').findByUid('uid-2')).to.deep.equal({ uid: 'uid-2' });
      });

      it('finds by uid only what the record holds now', async () => {
        const model = store.model('Session');
        await model.upsert('s1', { uid: 'old' }, 60);
        await model.upsert('s1', { uid: 'new' }, 60);
        expect(await model.findByUid('old')).to.equal(undefined);
        expect(await model.findByUid('new')).to.deep.equal({ uid: 'new' });
      });

      it('revokes by grant id also what is found by user code, and a record only while it is of that grant', async () => {
        const model = store.model('DeviceCode');
        await model.upsert('d1', { grantId: 'g1', userCode: 'CODE-1' }, 60);
        await model.upsert('d2', { grantId: 'g2', userCode: 'CODE-2' }, 60);
        await model.upsert('d3', { grantId: 'g1' }, 60);
        await model.upsert('d3', { grantId: 'g2' }, 60);
        await model.revokeByGrantId('g1');
        expect(await model.find('d1')).to.equal(undefined);
        expect(await model.findByUserCode('CODE-1')).to.equal(undefined);
        expect(await model.findByUserCode('CODE-2')).to.deep.equal({ grantId: 'g2', userCode: 'CODE-2' });
        expect(await model.find('d3')).to.deep.equal({ grantId: 'g2' });
        await model.revokeByGrantId('g2');
        expect(await model.find('d2')).to.equal(undefined);
        expect(await model.find('d3')).to.equal(undefined);
      });

      it('lists grants by their user and clients by their workspace: only live records, each under its own value, none once destroyed', async () => {
        const grants = store.model('Grant');
        await grants.upsert('g1', { accountId: 'usr_1', clientId: 'c1' }, 60);
        await grants.upsert('g2', { accountId: 'usr_1', clientId: 'c2' }, 60);
        await grants.upsert('g3', { accountId: 'usr_2', clientId: 'c1' }, 60);
        await grants.upsert('g4', { clientId: 'c3' }, 60);
        await store.model('Client').upsert('c1', { client_id: 'c1', workspace_id: 'ws_1' }, undefined);
        await store.model('Client').upsert('c2', { client_id: 'c2' }, undefined);
        // Another model's records are never listed, whatever fields they have.
        await store.model('RefreshToken').upsert('r1', { accountId: 'usr_1', grantId: 'g1' }, 60);
        const ids = async (model: string, value: string) => (await store.model(model).listBy(value)).map(({ id }) => id).sort();

        await store.model('Session').upsert('s1', { accountId: 'usr_1', uid: 'u1' }, 60);
        await store.model('Session').upsert('s2', { uid: 'u2' }, 60);
        await store.model('GrantWorkspace').upsert('g1', { grantId: 'g1', workspaceId: 'ws_1' }, 60);
        await store.model('InitialAccessToken').upsert('iat1', { workspaceId: 'ws_1', maxUses: 1 }, 60);
        await store.model('Invitation').upsert('inv1', { workspaceId: 'ws_1', role: 'member' }, 60);
        await store.model('Invitation').upsert('inv2', { workspaceId: 'ws_2', role: 'admin' }, 60);
        expect(await ids('Session', 'usr_1')).to.deep.equal(['s1']);
        expect(await ids('GrantWorkspace', 'ws_1')).to.deep.equal(['g1']);
        expect(await ids('InitialAccessToken', 'ws_1')).to.deep.equal(['iat1']);
        expect(await ids('Invitation', 'ws_1'), 'a workspace\'s invitations').to.deep.equal(['inv1']);
        await store.model('Invitation').destroy('inv1');
        expect(await ids('Invitation', 'ws_1')).to.deep.equal([]);
        expect(await ids('Invitation', 'ws_2')).to.deep.equal(['inv2']);
        await store.model('Session').destroy('s1');
        expect(await ids('Session', 'usr_1')).to.deep.equal([]);

        expect(await ids('Grant', 'usr_1')).to.deep.equal(['g1', 'g2']);
        expect((await grants.listBy('usr_2'))).to.deep.equal([{ id: 'g3', payload: { accountId: 'usr_2', clientId: 'c1' } }]);
        expect(await ids('Client', 'ws_1')).to.deep.equal(['c1']);
        expect(await ids('RefreshToken', 'usr_1')).to.deep.equal([]);
        expect(await ids('Grant', 'nobody')).to.deep.equal([]);

        await grants.destroy('g1');
        await store.model('Client').destroy('c1');
        expect(await ids('Grant', 'usr_1')).to.deep.equal(['g2']);
        expect(await ids('Client', 'ws_1')).to.deep.equal([]);
      });

      it('revokes by grant id within one model only', async () => {
        await store.model('AccessToken').upsert('a1', { grantId: 'g1' }, 60);
        await store.model('AccessToken').upsert('a2', { grantId: 'g2' }, 60);
        await store.model('RefreshToken').upsert('r1', { grantId: 'g1' }, 60);
        await store.model('AccessToken').revokeByGrantId('g1');
        expect(await store.model('AccessToken').find('a1')).to.equal(undefined);
        expect(await store.model('AccessToken').find('a2')).to.not.equal(undefined);
        expect(await store.model('RefreshToken').find('r1')).to.not.equal(undefined);
      });
    });

    describe('expiry', () => {
      const now = () => Math.floor(Date.now() / 1000);

      // One wait for everything that lapses (a second's granularity makes each wait two seconds); each check says what it is about.
      // Entries dated in whole seconds lapse at the first second boundary past their date, so one dated
      // now() + 1 can be gone before it is read back (a slow replicated write is enough); now() + 2
      // lives at least a second, and is past once the wait is over.
      it('forgets what has expired: engine records (found, listed, consumed, counted), revocation entries and API keys', async () => {
        // Read back before the wait: given 2 s, as a record given 1 s can lapse before it is read.
        const codes = store.model('AuthorizationCode');
        await codes.upsert('c1', { jti: 'c1' }, 2);
        expect(await codes.find('c1')).to.deep.equal({ jti: 'c1' });
        const initialAccessTokens = store.model('InitialAccessToken');
        await initialAccessTokens.upsert('t1', { kind: 'InitialAccessToken' }, 2);
        expect(await initialAccessTokens.countUse('t1', 5)).to.equal(1);
        await store.model('Grant').upsert('short', { accountId: 'usr_1' }, 1);
        await store.model('Grant').upsert('long', { accountId: 'usr_1' }, 60);
        await store.revocations.add({ key: 'token:short', issuedBefore: now() + 2, expiresAt: now() + 2 });
        await store.revocations.add({ key: 'token:long', issuedBefore: now() + 60, expiresAt: now() + 60 });
        expect((await store.revocations.changesSince(0)).entries.map((e) => e.key)).to.deep.equal(['token:short', 'token:long']);
        const apiKey = (id: string, expiresAt: number): ApiKeyRecord => ({ id, workspaceId: 'ws_1', name: `key ${id}`, digest: `digest-${id}`, hint: 'wsk_Ab', createdAt: now(), expiresAt });
        await store.apiKeys.create(apiKey('short', now() + 1));
        // Every client is listed: one on probation (a lifetime until first used) too, and one whose probation ended after its old expiry.
        const clients = store.model('Client');
        const listedClients = async () => (await clients.list()).map(({ id }) => id);
        await clients.upsert('kept', { client_id: 'kept' }, undefined);
        await clients.upsert('on-probation', { client_id: 'on-probation' }, 60);
        await clients.upsert('lapsing', { client_id: 'lapsing' }, 2);
        await clients.upsert('used', { client_id: 'used' }, 2);
        await clients.upsert('used', { client_id: 'used', used: true }, undefined);
        await clients.upsert('deleted', { client_id: 'deleted' }, 60);
        await clients.destroy('deleted');
        // Order aside: clients stored in the same millisecond are listed in id order on Redis.
        expect(await listedClients(), 'clients listed, with a lifetime or not').to.have.members(['kept', 'on-probation', 'lapsing', 'used']);
        await store.apiKeys.create(apiKey('long', now() + 60));
        expect(await store.model('ReplayDetection').insertNew('jti-short', { iss: 'client-1' }, 1)).to.equal(true);
        const keyedRecord = (id: string) => ({ id, createdAt: new Date().toISOString(), updatedAt: new Date().toISOString(), values: {} });
        expect(await store.records.createOnce('ws_1', 'companies', keyedRecord('c1'), { key: 'k', fingerprint: 'f', keptFor: 1.5 })).to.have.key('created');
        expect(await store.records.createOnce('ws_1', 'companies', keyedRecord('c2'), { key: 'k', fingerprint: 'f', keptFor: 1.5 })).to.have.key('earlier');

        await sleep(2100);

        expect(await store.records.createOnce('ws_1', 'companies', keyedRecord('c3'), { key: 'k', fingerprint: 'f', keptFor: 60 }), 'a keyed create past its time').to.have.key('created');

        expect(await store.model('ReplayDetection').insertNew('jti-short', { iss: 'client-1' }, 60), 'a single-use marker stored again once expired').to.equal(true);

        expect(await codes.find('c1'), 'an expired record').to.equal(undefined);
        expect(await codes.list(), 'expired records listed').to.deep.equal([]);
        await clients.upsert('registered-later', { client_id: 'registered-later' }, 60);
        expect(await listedClients(), 'clients listed once one has expired').to.have.members(['kept', 'on-probation', 'used', 'registered-later']);
        expect(await codes.consume('c1'), 'an expired record consumed').to.equal(undefined);
        expect(await codes.find('c1'), 'an expired record, once its consumption was refused').to.equal(undefined);
        expect(await initialAccessTokens.countUse('t1', 5), 'a use of an expired record').to.equal(0);
        expect(await initialAccessTokens.find('t1'), 'an expired record, once its use was refused').to.equal(undefined);
        expect((await store.model('Grant').listBy('usr_1')).map(({ id }) => id), 'records listed by their user').to.deep.equal(['long']);
        expect((await store.revocations.changesSince(0)).entries.map((e) => e.key), 'revocation entries').to.deep.equal(['token:long']);
        expect(await store.apiKeys.findByDigest('digest-short'), 'an expired API key by its digest').to.equal(undefined);
        expect(await store.apiKeys.get('short'), 'an expired API key').to.equal(undefined);
        expect((await store.apiKeys.list('ws_1')).map((k) => k.id), 'API keys listed').to.deep.equal(['long']);
      });
    });

    describe('accounts', () => {
      it('stores workspaces, users and memberships', async () => {
        await store.accounts.createWorkspace({ id: 'ws_1', name: 'Acme', createdAt: 1 });
        await store.accounts.createWorkspace({ id: 'ws_2', name: 'Beta', createdAt: 2 });
        await store.accounts.createUser({ id: 'usr_1', email: 'Ann@Example.com', name: 'Ann', passwordHash: 'h', createdAt: 1 });
        await store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_2', role: 'viewer' });
        await store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_1', role: 'member' });
        await store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_1', role: 'admin' });

        expect((await store.accounts.listWorkspaces()).map((w) => w.id)).to.deep.equal(['ws_1', 'ws_2']);
        expect((await store.accounts.findUserByEmail('ann@example.com'))?.id).to.equal('usr_1');
        expect(await store.accounts.countUsers()).to.equal(1);
        expect(await store.accounts.getMembership('usr_1', 'ws_1')).to.deep.equal({ userId: 'usr_1', workspaceId: 'ws_1', role: 'admin' });
        expect(await store.accounts.getMembership('usr_1', 'ws_3')).to.equal(undefined);
        expect(await store.accounts.getMembership('usr_2', 'ws_1')).to.equal(undefined);
        expect(await store.accounts.listMemberships('usr_1')).to.deep.equal([
          { userId: 'usr_1', workspaceId: 'ws_1', role: 'admin' },
          { userId: 'usr_1', workspaceId: 'ws_2', role: 'viewer' },
        ]);
      });

      it('refuses a second user with the same email in another case', async () => {
        await store.accounts.createUser({ id: 'usr_1', email: 'ann@example.com', name: 'Ann', passwordHash: 'h', createdAt: 1 });
        let error: unknown;
        try {
          await store.accounts.createUser({ id: 'usr_2', email: 'ANN@example.com', name: 'Other', passwordHash: 'h', createdAt: 1 });
        } catch (caught) {
          error = caught;
        }
        expect(error).to.be.instanceOf(DuplicateError);
        expect(await store.accounts.countUsers()).to.equal(1);
      });

      /** Workspace ws_1 with users usr_1 (created first) to usr_<count>, each with the role given, in order. */
      async function seedMembers(roles: Array<'admin' | 'member' | 'viewer'>): Promise<void> {
        await store.accounts.createWorkspace({ id: 'ws_1', name: 'Acme', createdAt: 1 });
        for (const [i, role] of roles.entries()) {
          await store.accounts.createUser({ id: `usr_${i + 1}`, email: `user${i + 1}@example.com`, name: `User ${i + 1}`, passwordHash: 'h', createdAt: 10 - i });
          await store.accounts.putMembership({ userId: `usr_${i + 1}`, workspaceId: 'ws_1', role });
        }
      }

      async function refusal(change: Promise<unknown>): Promise<unknown> {
        try {
          await change;
        } catch (error) {
          return error;
        }
        return undefined;
      }

      const members = async (workspaceId = 'ws_1') => (await store.accounts.listMembers(workspaceId))
        .map(({ userId, role }) => `${userId}:${role}`).sort();

      it('lists users oldest first, a workspace\'s members, and replaces a password hash', async () => {
        await seedMembers(['admin', 'viewer']);
        await store.accounts.createUser({ id: 'usr_0', email: 'zed@example.com', name: 'Zed', passwordHash: 'h', createdAt: 9 });
        expect((await store.accounts.listUsers()).map(({ id }) => id)).to.deep.equal(['usr_0', 'usr_2', 'usr_1']);
        expect(await members()).to.deep.equal(['usr_1:admin', 'usr_2:viewer']);
        expect(await store.accounts.listMembers('ws_2')).to.deep.equal([]);

        expect(await store.accounts.setPasswordHash('usr_2', 'new-hash')).to.equal(true);
        expect(await store.accounts.getUser('usr_2')).to.deep.equal({ id: 'usr_2', email: 'user2@example.com', name: 'User 2', passwordHash: 'new-hash', createdAt: 9 });
        expect(await store.accounts.setPasswordHash('usr_9', 'new-hash')).to.equal(false);
      });

      it('removes and changes memberships, but never demotes or removes the last admin of a workspace', async () => {
        await seedMembers(['admin', 'member', 'viewer']);
        for (const change of [
          store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_1', role: 'member' }),
          store.accounts.removeMembership('usr_1', 'ws_1'),
          store.accounts.deleteUser('usr_1'),
        ]) {
          const error = await refusal(change);
          expect(error).to.be.instanceOf(LastAdminError);
          expect((error as LastAdminError).workspaceId).to.equal('ws_1');
        }
        expect(await members()).to.deep.equal(['usr_1:admin', 'usr_2:member', 'usr_3:viewer']);
        expect(await store.accounts.getUser('usr_1')).to.not.equal(undefined);

        expect(await store.accounts.removeMembership('usr_3', 'ws_1')).to.equal(true);
        expect(await store.accounts.removeMembership('usr_3', 'ws_1')).to.equal(false);
        expect(await store.accounts.getMembership('usr_3', 'ws_1')).to.equal(undefined);
        await store.accounts.putMembership({ userId: 'usr_2', workspaceId: 'ws_1', role: 'admin' });
        // With another admin, the first may go.
        await store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_1', role: 'viewer' });
        expect(await members()).to.deep.equal(['usr_1:viewer', 'usr_2:admin']);
        expect(await store.accounts.listMemberships('usr_1')).to.deep.equal([{ userId: 'usr_1', workspaceId: 'ws_1', role: 'viewer' }]);
        expect(await refusal(store.accounts.removeMembership('usr_2', 'ws_1'))).to.be.instanceOf(LastAdminError);
      });

      it('lets a workspace that has no admin lose its members', async () => {
        await seedMembers(['member', 'viewer']);
        expect(await store.accounts.removeMembership('usr_1', 'ws_1')).to.equal(true);
        expect(await store.accounts.deleteUser('usr_2')).to.equal(true);
        expect(await members()).to.deep.equal([]);
      });

      /** Workspace ws_<round> with admins a<round> and b<round>. */
      async function twoAdmins(round: number): Promise<void> {
        await store.accounts.createWorkspace({ id: `ws_${round}`, name: 'Race', createdAt: 1 });
        for (const user of [`a${round}`, `b${round}`]) {
          await store.accounts.createUser({ id: user, email: `${user}@example.com`, name: user, passwordHash: 'h', createdAt: 1 });
          await store.accounts.putMembership({ userId: user, workspaceId: `ws_${round}`, role: 'admin' });
        }
      }

      const admins = async (workspaceId: string) => (await members(workspaceId)).filter((member) => member.endsWith(':admin'));

      it('of two admins demoting, removing or deleting each other at once, lets exactly one win', async () => {
        for (const [round, other] of ['demote', 'remove', 'delete'].entries()) {
          await twoAdmins(round);
          const outcomes = await Promise.allSettled([
            store.accounts.putMembership({ userId: `a${round}`, workspaceId: `ws_${round}`, role: 'member' }),
            other === 'demote' ? store.accounts.putMembership({ userId: `b${round}`, workspaceId: `ws_${round}`, role: 'viewer' })
              : other === 'remove' ? store.accounts.removeMembership(`b${round}`, `ws_${round}`) : store.accounts.deleteUser(`b${round}`),
          ]);
          expect(outcomes.filter(({ status }) => status === 'fulfilled'), other).to.have.length(1);
          const refused = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
          expect(refused?.reason, other).to.be.instanceOf(LastAdminError);
          expect(await admins(`ws_${round}`), other).to.have.length(1);
        }
      });

      // A memory store is private to its process: there is no second store to race.
      if (backend.shared) it('of two admins demoting, removing or deleting each other from separate processes, lets exactly one win', async function () {
        this.timeout(60_000);
        const { url, options } = backend.target(dir);
        for (const [round, other] of ['demote', 'remove', 'delete'].entries()) {
          await twoAdmins(round);
          await store.committed();
          const results = await inProcesses('account_change_child.ts', [
            [url, options?.keyPrefix ?? '', 'demote', `a${round}`, `ws_${round}`],
            [url, options?.keyPrefix ?? '', other, `b${round}`, `ws_${round}`],
          ]);
          expect(results.slice().sort(), other).to.deep.equal(['LastAdminError', 'done']);
          expect(await admins(`ws_${round}`), other).to.have.length(1);
        }
      });

      it('deletes a user with their memberships, and frees their email', async () => {
        await seedMembers(['admin', 'member']);
        await store.accounts.createWorkspace({ id: 'ws_2', name: 'Beta', createdAt: 2 });
        await store.accounts.putMembership({ userId: 'usr_2', workspaceId: 'ws_2', role: 'admin' });
        await store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_2', role: 'admin' });

        expect(await store.accounts.deleteUser('usr_2')).to.equal(true);
        expect(await store.accounts.deleteUser('usr_2')).to.equal(false);
        expect(await store.accounts.getUser('usr_2')).to.equal(undefined);
        expect(await store.accounts.findUserByEmail('USER2@example.com')).to.equal(undefined);
        expect(await store.accounts.getMembership('usr_2', 'ws_1')).to.equal(undefined);
        expect(await store.accounts.listMemberships('usr_2')).to.deep.equal([]);
        expect(await members('ws_1')).to.deep.equal(['usr_1:admin']);
        expect(await members('ws_2')).to.deep.equal(['usr_1:admin']);
        expect(await store.accounts.countUsers()).to.equal(1);
        expect((await store.accounts.listUsers()).map(({ id }) => id)).to.deep.equal(['usr_1']);
        await store.accounts.createUser({ id: 'usr_3', email: 'user2@example.com', name: 'Again', passwordHash: 'h', createdAt: 3 });
        expect((await store.accounts.findUserByEmail('user2@example.com'))?.id).to.equal('usr_3');
      });

      it('deletes a workspace with its memberships, and its people keep their other workspaces', async () => {
        await seedMembers(['admin', 'member']);
        await store.accounts.createWorkspace({ id: 'ws_2', name: 'Beta', createdAt: 2 });
        await store.accounts.putMembership({ userId: 'usr_2', workspaceId: 'ws_2', role: 'admin' });

        expect(await store.accounts.deleteWorkspace('ws_1')).to.equal(true);
        expect(await store.accounts.deleteWorkspace('ws_1')).to.equal(false);
        expect(await store.accounts.getWorkspace('ws_1')).to.equal(undefined);
        expect((await store.accounts.listWorkspaces()).map(({ id }) => id)).to.deep.equal(['ws_2']);
        expect(await store.accounts.listMembers('ws_1')).to.deep.equal([]);
        expect(await store.accounts.getMembership('usr_1', 'ws_1')).to.equal(undefined);
        expect(await store.accounts.listMemberships('usr_1')).to.deep.equal([]);
        expect(await store.accounts.listMemberships('usr_2')).to.deep.equal([{ userId: 'usr_2', workspaceId: 'ws_2', role: 'admin' }]);
        // Nobody joins a workspace that is gone; its former last admin may now be deleted.
        expect(await refusal(store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_1', role: 'admin' }))).to.be.instanceOf(Error);
        expect(await store.accounts.deleteUser('usr_1')).to.equal(true);
      });
    });

    describe('settings', () => {
      it('keeps the first value written', async () => {
        expect(await store.settings.get('k')).to.equal(undefined);
        const results = await Promise.all([store.settings.setIfAbsent('k', 'one'), store.settings.setIfAbsent('k', 'two')]);
        expect(results[0]).to.equal(results[1]);
        expect(await store.settings.get('k')).to.equal(results[0]);
      });

      it('replaces a value only if it still holds what the writer read: of two racing writers one wins', async () => {
        expect(await store.settings.compareAndSet('cas', 'anything', 'x'), 'not set').to.equal(false);
        expect(await store.settings.get('cas')).to.equal(undefined);
        await store.settings.setIfAbsent('cas', 'v1');
        const results = await Promise.all([store.settings.compareAndSet('cas', 'v1', 'two'), store.settings.compareAndSet('cas', 'v1', 'three')]);
        expect(results.filter(Boolean)).to.have.length(1);
        expect(await store.settings.get('cas')).to.equal(results[0] ? 'two' : 'three');
        expect(await store.settings.compareAndSet('cas', 'v1', 'four'), 'from a stale read').to.equal(false);
      });
    });

    describe('revocation list', () => {
      const now = () => Math.floor(Date.now() / 1000);

      it('returns entries in the order written, and from a cursor only what came after it', async () => {
        const first = { key: 'grant:g1', issuedBefore: now() + 60, expiresAt: now() + 60 };
        const second = { key: 'token:t1', owner: 'client:c1', issuedBefore: now() + 60, expiresAt: now() + 60 };
        await store.revocations.add(first);
        const afterFirst = await store.revocations.changesSince(0);
        expect(afterFirst.entries).to.deep.equal([first]);
        await store.revocations.add(second);
        const all = await store.revocations.changesSince(0);
        expect(all.entries).to.deep.equal([first, second]);
        const later = await store.revocations.changesSince(afterFirst.cursor);
        expect(later.entries).to.deep.equal([second]);
        expect((await store.revocations.changesSince(all.cursor)).entries).to.deep.equal([]);
      });

      it('widens an entry written again under the same key, and shows it again to readers past it', async () => {
        const at = now();
        await store.revocations.add({ key: 'client:c1', issuedBefore: at + 1, expiresAt: at + 100 });
        const { cursor } = await store.revocations.changesSince(0);
        await store.revocations.add({ key: 'client:c1', issuedBefore: at + 200, expiresAt: at + 50 });
        const { entries } = await store.revocations.changesSince(cursor);
        expect(entries).to.deep.equal([{ key: 'client:c1', issuedBefore: at + 200, expiresAt: at + 100 }]);
        expect((await store.revocations.changesSince(0)).entries).to.have.length(1);
      });

    });

    describe('data records', () => {
      const at = '2026-11-22T10:00:00.000Z';
      const later = '2026-11-22T11:00:00.000Z';
      const create = (workspace: string, object: string, id: string, values: Record<string, unknown> = {}) =>
        store.records.create(workspace, object, { id, createdAt: at, updatedAt: at, values });

      it('creates, reads, merges updates into and deletes a record', async () => {
        const created = await create('ws_1', 'companies', 'c1', { name: 'Acme', employees: 12, city: null });
        expect(created).to.deep.include({ id: 'c1', createdAt: at, updatedAt: at, values: { name: 'Acme', employees: 12 } });
        expect(created.position).to.be.a('number').greaterThan(0);
        expect(await store.records.get('ws_1', 'companies', 'c1')).to.deep.equal(created);

        const updated = await store.records.update('ws_1', 'companies', 'c1', { employees: null, city: 'Paris' }, later);
        expect(updated).to.deep.equal({ ...created, updatedAt: later, values: { name: 'Acme', city: 'Paris' } });
        expect(await store.records.get('ws_1', 'companies', 'c1')).to.deep.equal(updated);

        expect(await store.records.delete('ws_1', 'companies', 'c1')).to.equal(true);
        expect(await store.records.delete('ws_1', 'companies', 'c1')).to.equal(false);
        expect(await store.records.get('ws_1', 'companies', 'c1')).to.equal(undefined);
        expect(await store.records.update('ws_1', 'companies', 'c1', { name: 'Back' }, later)).to.equal(undefined);
        expect(await store.records.get('ws_1', 'companies', 'c1')).to.equal(undefined);
      });

      it('keeps both of two concurrent updates of different fields', async () => {
        await create('ws_1', 'people', 'p1', { firstName: 'Ann' });
        await Promise.all([
          store.records.update('ws_1', 'people', 'p1', { lastName: 'Lee' }, later),
          store.records.update('ws_1', 'people', 'p1', { jobTitle: 'CTO' }, later),
        ]);
        expect((await store.records.get('ws_1', 'people', 'p1'))?.values).to.deep.equal({ firstName: 'Ann', lastName: 'Lee', jobTitle: 'CTO' });
      });

      it('keeps workspaces and object types apart, even under the same id', async () => {
        await create('ws_1', 'companies', 'same', { name: 'One' });
        await create('ws_2', 'companies', 'same', { name: 'Two' });
        await create('ws_1', 'people', 'same', { firstName: 'Three' });
        let duplicate: unknown;
        await create('ws_1', 'companies', 'same', { name: 'Again' }).catch((error: unknown) => { duplicate = error; });
        expect(duplicate, 'a second record under a taken id').to.be.instanceOf(DuplicateError);
        expect((await store.records.get('ws_2', 'companies', 'same'))?.values).to.deep.equal({ name: 'Two' });
        expect(await store.records.get('ws_3', 'companies', 'same')).to.equal(undefined);
        expect([...await store.records.existing('ws_1', 'companies', ['same', 'other'])]).to.deep.equal(['same']);
        expect([...await store.records.existing('ws_3', 'companies', ['same'])]).to.deep.equal([]);
        expect(await store.records.update('ws_3', 'companies', 'same', { name: 'Hijack' }, later)).to.equal(undefined);
        expect(await store.records.delete('ws_3', 'companies', 'same')).to.equal(false);
        expect(await store.records.delete('ws_2', 'companies', 'same')).to.equal(true);
        expect((await store.records.get('ws_1', 'companies', 'same'))?.values).to.deep.equal({ name: 'One' });
        expect((await store.records.list('ws_2', 'companies', 0, 10)).total).to.equal(0);
      });

      it('lists in creation order, a page at a time, and a deleted record does not break a cursor', async () => {
        for (let i = 1; i <= 5; i += 1) await create('ws_1', 'companies', `c${i}`, { name: `Company ${i}` });
        await create('ws_2', 'companies', 'elsewhere', { name: 'Other workspace' });
        const first = await store.records.list('ws_1', 'companies', 0, 2);
        expect(first.records.map((r) => r.id)).to.deep.equal(['c1', 'c2']);
        expect(first).to.include({ total: 5, hasMore: true });
        await store.records.delete('ws_1', 'companies', 'c2');
        const second = await store.records.list('ws_1', 'companies', first.records[1]!.position, 2);
        expect(second.records.map((r) => r.id)).to.deep.equal(['c3', 'c4']);
        expect(second).to.include({ total: 4, hasMore: true });
        const last = await store.records.list('ws_1', 'companies', second.records[1]!.position, 2);
        expect(last.records.map((r) => r.id)).to.deep.equal(['c5']);
        expect(last.hasMore).to.equal(false);
        expect((await store.records.list('ws_1', 'people', 0, 2))).to.deep.equal({ records: [], total: 0, hasMore: false });
      });

      it('deletes every record of an object in a workspace, and nothing of another workspace or object', async () => {
        const at = new Date().toISOString();
        for (let i = 0; i < 230; i += 1) await store.records.create('ws_1', 'companies', { id: `c${i}`, createdAt: at, updatedAt: at, values: { name: `C${i}` } });
        await store.records.create('ws_1', 'people', { id: 'p1', createdAt: at, updatedAt: at, values: { firstName: 'Ann' } });
        await store.records.create('ws_2', 'companies', { id: 'c1', createdAt: at, updatedAt: at, values: { name: 'Other' } });

        expect(await store.records.deleteAll('ws_1', 'companies')).to.equal(230);
        expect(await store.records.deleteAll('ws_1', 'companies')).to.equal(0);
        expect(await store.records.list('ws_1', 'companies', 0, 10)).to.deep.equal({ records: [], total: 0, hasMore: false });
        expect(await store.records.get('ws_1', 'companies', 'c1')).to.equal(undefined);
        expect((await store.records.list('ws_1', 'people', 0, 10)).total).to.equal(1);
        expect((await store.records.list('ws_2', 'companies', 0, 10)).total).to.equal(1);
      });

      it('never gives a position twice, also once every record of the object was deleted', async () => {
        let highest = 0;
        // Several rounds: on Redis a repeat would need a delete and a create in one millisecond.
        for (let round = 0; round < 20; round += 1) {
          const ids = ['c1', 'c2', 'c3'].map((id) => `${id}-${round}`);
          const created = await Promise.all(ids.map((id) => create('ws_1', 'companies', id)));
          const positions = created.map((r) => r.position);
          expect(new Set(positions).size).to.equal(3);
          expect(Math.min(...positions), `round ${round}`).to.be.greaterThan(highest);
          highest = Math.max(...positions);
          for (const id of ids) await store.records.delete('ws_1', 'companies', id);
        }
      });

      it('makes a keyed create once: a create under a key still kept writes nothing and gives back what the first made, in its workspace only', async () => {
        const keyed = (key: string, fingerprint: string) => ({ key, fingerprint, keptFor: 60 });
        const record = (id: string) => ({ id, createdAt: at, updatedAt: at, values: { name: id } });
        expect(await store.records.createOnce('ws_1', 'companies', record('c1'), keyed('k1', 'f1')))
          .to.deep.include({ created: { ...(await store.records.get('ws_1', 'companies', 'c1'))! } });
        expect(await store.records.createOnce('ws_1', 'companies', record('c2'), keyed('k1', 'f2'))).to.deep.equal({ earlier: { fingerprint: 'f1', object: 'companies', id: 'c1' } });
        // A key spans the workspace's objects: the same key for another collection is told of the first create too.
        expect(await store.records.createOnce('ws_1', 'people', record('p1'), keyed('k1', 'f3'))).to.deep.equal({ earlier: { fingerprint: 'f1', object: 'companies', id: 'c1' } });
        expect(await store.records.get('ws_1', 'companies', 'c2')).to.equal(undefined);
        expect((await store.records.list('ws_1', 'people', 0, 10)).total).to.equal(0);
        expect(await store.records.createOnce('ws_2', 'companies', record('c1'), keyed('k1', 'f1'))).to.have.key('created');

        // A create refused for its id keeps no key: the next create under it is made.
        let duplicate: unknown;
        await store.records.createOnce('ws_1', 'companies', record('c1'), keyed('k2', 'f1')).catch((error: unknown) => { duplicate = error; });
        expect(duplicate).to.be.instanceOf(DuplicateError);
        expect(await store.records.createOnce('ws_1', 'companies', record('c3'), keyed('k2', 'f1'))).to.have.key('created');

        // Many at once under one key: exactly one record, and every other create is told of it.
        const raced = await Promise.all(Array.from({ length: 10 }, (_, i) => store.records.createOnce('ws_1', 'companies', record(`r${i}`), keyed('k3', 'f1'))));
        const made = raced.flatMap((outcome) => ('created' in outcome ? [outcome.created.id] : []));
        expect(made).to.have.length(1);
        for (const outcome of raced) if ('earlier' in outcome) expect(outcome.earlier.id).to.equal(made[0]);
        expect((await store.records.list('ws_1', 'companies', 0, 100)).records.map((r) => r.id)).to.deep.equal(['c1', 'c3', made[0]]);

        // A deleted workspace's lists are emptied with the keys of their creates.
        await store.records.deleteAll('ws_1', 'companies');
        expect(await store.records.createOnce('ws_1', 'companies', record('c4'), keyed('k1', 'f1'))).to.have.key('created');
      });

      it('gives each list positions of its own, so a cursor says nothing of how many records other workspaces make', async () => {
        const before = await create('ws_2', 'companies', 'c-before');
        await Promise.all(Array.from({ length: 2000 }, (_, i) => create('ws_1', 'companies', `c${i}`)));
        const after = await create('ws_2', 'companies', 'c-after');
        // Store-wide numbering would put the 2,000 records of ws_1 between them.
        expect(after.position - before.position).to.be.greaterThan(0).and.lessThan(2000);
        const page = await store.records.list('ws_2', 'companies', before.position, 10);
        expect(page.records.map((r) => r.id)).to.deep.equal(['c-after']);
      });
    });

    describe('API keys', () => {
      const now = () => Math.floor(Date.now() / 1000);
      const key = (id: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord => ({
        id, workspaceId: 'ws_1', name: `key ${id}`, digest: `digest-${id}`, hint: 'wsk_Ab', createdAt: now(), ...overrides,
      });

      it('finds a key by its digest and by its id, lists a workspace\'s keys oldest first, and deletes one', async () => {
        // One instant for the record and what it is compared with (a second may tick between two now()s).
        const first = key('k1', { createdAt: now() - 10, expiresAt: now() + 3600 });
        await store.apiKeys.create(first);
        await store.apiKeys.create(key('k2'));
        await store.apiKeys.create(key('k3', { workspaceId: 'ws_2' }));
        expect(await store.apiKeys.findByDigest('digest-k1')).to.deep.equal(first);
        expect((await store.apiKeys.get('k2'))?.name).to.equal('key k2');
        expect(await store.apiKeys.findByDigest('digest-unknown')).to.equal(undefined);
        expect((await store.apiKeys.list('ws_1')).map((k) => k.id)).to.deep.equal(['k1', 'k2']);
        expect(await store.apiKeys.delete('k1')).to.equal(true);
        expect(await store.apiKeys.delete('k1')).to.equal(false);
        expect(await store.apiKeys.findByDigest('digest-k1')).to.equal(undefined);
        expect((await store.apiKeys.list('ws_1')).map((k) => k.id)).to.deep.equal(['k2']);
      });

      it('lists keys of the same creation time in the order they were created', async () => {
        const at = now();
        await store.apiKeys.create(key('b', { createdAt: at }));
        await store.apiKeys.create(key('a', { createdAt: at }));
        await store.apiKeys.create(key('c', { createdAt: at }));
        await store.apiKeys.create(key('earlier', { createdAt: at - 1 }));
        expect((await store.apiKeys.list('ws_1')).map((k) => k.id)).to.deep.equal(['earlier', 'b', 'a', 'c']);
      });

      it('refuses a second key with the same digest', async () => {
        await store.apiKeys.create(key('k1'));
        let error: unknown;
        try {
          await store.apiKeys.create(key('k2', { digest: 'digest-k1' }));
        } catch (caught) {
          error = caught;
        }
        expect(error).to.be.instanceOf(DuplicateError);
        expect((await store.apiKeys.list('ws_1')).map((k) => k.id)).to.deep.equal(['k1']);
      });

      it('records the last use, never moving it back, and not for a deleted key', async () => {
        await store.apiKeys.create(key('k1'));
        await store.apiKeys.touch('k1', 2000);
        await store.apiKeys.touch('k1', 1000);
        expect((await store.apiKeys.get('k1'))?.lastUsedAt).to.equal(2000);
        await store.apiKeys.delete('k1');
        await store.apiKeys.touch('k1', 3000);
        expect(await store.apiKeys.get('k1')).to.equal(undefined);
      });

    });

    describe('rate limiters', () => {
      const refusal = (attempt: Promise<RateLimiterRes>) => attempt.then(() => undefined, (refused: unknown) => refused);

      // A Redis limiter counts in process until its store's connection is ready (as during an outage, test/rate_limits.test.ts).
      beforeEach(() => store.ping());

      it('counts each key on its own, refuses past the points with the time left, and keeps each name apart', async () => {
        const limiter = store.rateLimiter({ name: 'contract', points: 2, duration: 60 });
        expect((await limiter.consume('a')).remainingPoints).to.equal(1);
        await limiter.consume('a');
        const refused = await refusal(limiter.consume('a'));
        expect(refused).to.be.instanceOf(RateLimiterRes);
        expect((refused as RateLimiterRes).msBeforeNext).to.be.within(1, 60_000);
        expect((await limiter.consume('b')).consumedPoints, 'another key').to.equal(1);
        expect((await store.rateLimiter({ name: 'other', points: 2, duration: 60 }).consume('a')).consumedPoints, 'another name').to.equal(1);
        expect(store.rateLimiter({ name: 'contract', points: 2, duration: 60 }), 'the same rule again: the same limiter').to.equal(limiter);
        expect(() => store.rateLimiter({ name: 'contract', points: 3, duration: 60 }), 'another rule under the name').to.throw(TypeError);
      });

      it('forgets a key when its window ends, holds a key when blocked, and forgets it when deleted', async () => {
        const limiter = store.rateLimiter({ name: 'windows', points: 1, duration: 1 });
        await limiter.consume('a');
        expect(await refusal(limiter.consume('a'))).to.be.instanceOf(RateLimiterRes);
        await sleep(1100);
        expect((await limiter.consume('a')).consumedPoints, 'a new window').to.equal(1);

        await limiter.block('b', 60);
        expect((await limiter.get('b'))?.msBeforeNext).to.be.within(59_000, 60_000);
        expect(await refusal(limiter.consume('b'))).to.be.instanceOf(RateLimiterRes);
        await limiter.delete('b');
        expect(await limiter.get('b')).to.equal(null);
        expect((await limiter.consume('b')).consumedPoints).to.equal(1);
      });

      it('adds and takes back points without refusing, and opens a window of the length a caller asks for', async () => {
        const limiter = store.rateLimiter({ name: 'points', points: 1, duration: 60 });
        expect((await limiter.penalty('a')).consumedPoints).to.equal(1);
        expect((await limiter.penalty('a')).consumedPoints, 'past the points, not refused').to.equal(2);
        expect((await limiter.reward('a')).consumedPoints).to.equal(1);
        expect((await limiter.consume('c', 1, { customDuration: 5 })).msBeforeNext).to.be.within(1, 5000);
      });

      it(backend.redis ? 'shares its counts with another store on the same Redis' : 'counts in this process: another store on the same data counts alone', async () => {
        const other = open(backend, dir);
        try {
          await other.ping();
          const rule = { name: 'instances', points: 1, duration: 60 };
          await store.rateLimiter(rule).consume('k');
          const second = await refusal(other.rateLimiter(rule).consume('k'));
          if (backend.redis) expect(second).to.be.instanceOf(RateLimiterRes);
          else expect(second).to.equal(undefined);
        } finally {
          await other.close();
        }
      });

      if (backend.redis) it('keeps its counts under the store prefix, `rl:<name>:<key>`, each with a TTL no longer than its window or block', async () => {
        await store.rateLimiter({ name: 'ttl', points: 5, duration: 30 }).consume('some-key');
        await store.rateLimiter({ name: 'lock', points: 1, duration: 60 }).block('k', 20);
        const { url, options } = backend.target(dir);
        const prefix = options!.keyPrefix!;
        const found = await keysUnder(url, prefix);
        expect([...found.keys()].sort()).to.deep.equal([`${prefix}rl:lock:k`, `${prefix}rl:ttl:some-key`]);
        expect(found.get(`${prefix}rl:ttl:some-key`)).to.be.within(1, 30_000);
        expect(found.get(`${prefix}rl:lock:k`)).to.be.within(1, 20_000);
      });
    });

    if (backend.redis) describe('redis keys', () => {
      const keys = () => {
        const { url, options } = backend.target(dir);
        return keysUnder(url, options!.keyPrefix!);
      };

      it('gives every key a TTL no longer than what it holds, except clients, accounts, settings, data records and API keys that never expire', async () => {
        const engineModels: Array<[string, Record<string, unknown>]> = [
          ['AccessToken', { grantId: 'g1' }], ['AuthorizationCode', { grantId: 'g1' }], ['RefreshToken', { grantId: 'g1' }],
          ['DeviceCode', { grantId: 'g1', userCode: 'CODE-1' }], ['BackchannelAuthenticationRequest', { grantId: 'g1' }],
          ['ClientCredentials', {}], ['Session', { uid: 'uid-1' }], ['Interaction', { uid: 'uid-2' }], ['Grant', { accountId: 'usr_1' }],
          ['RegistrationAccessToken', {}], ['InitialAccessToken', {}], ['PushedAuthorizationRequest', {}],
          ['ReplayDetection', {}], ['GrantWorkspace', { grantId: 'g1' }],
        ];
        for (const [name, payload] of engineModels) {
          const model = store.model(name);
          await model.upsert('kept', payload, 60);
          await model.upsert('consumed', { ...payload, uid: undefined, userCode: undefined }, 30);
          await model.consume('consumed');
          await model.upsert('destroyed', payload, 60);
          await model.destroy('destroyed');
          await model.upsert('kept', payload, 60);
          await model.countUse('kept', 2);
        }
        await store.model('Client').upsert('client-1', { client_id: 'client-1', workspace_id: 'ws_1' }, undefined);
        await store.accounts.createWorkspace({ id: 'ws_1', name: 'Acme', createdAt: 1 });
        await store.accounts.createUser({ id: 'usr_1', email: 'ann@example.com', name: 'Ann', passwordHash: 'h', createdAt: 1 });
        await store.accounts.putMembership({ userId: 'usr_1', workspaceId: 'ws_1', role: 'admin' });
        await store.settings.setIfAbsent('k', 'v');
        await store.revocations.add({ key: 'grant:g1', issuedBefore: Math.floor(Date.now() / 1000) + 40, expiresAt: Math.floor(Date.now() / 1000) + 40 });
        const at = new Date().toISOString();
        await store.records.create('ws_1', 'companies', { id: 'c1', createdAt: at, updatedAt: at, values: { name: 'Acme' } });
        await store.records.update('ws_1', 'companies', 'c1', { city: 'Paris' }, at);
        const now = Math.floor(Date.now() / 1000);
        const apiKey = (id: string, workspaceId: string, expiresAt?: number): ApiKeyRecord =>
          ({ id, workspaceId, name: id, digest: `digest-${id}`, hint: 'wsk_Ab', createdAt: now, ...(expiresAt ? { expiresAt } : {}) });
        // ws_1's list is kept for the key that never expires, also when created after one that does.
        await store.apiKeys.create(apiKey('soon', 'ws_1', now + 50));
        await store.apiKeys.create(apiKey('forever', 'ws_1'));
        await store.apiKeys.create(apiKey('sooner', 'ws_2', now + 30));
        await store.apiKeys.create(apiKey('later', 'ws_2', now + 50));
        await store.apiKeys.touch('later', now);

        const { options } = backend.target(dir);
        const prefix = options!.keyPrefix!;
        const kept = [/^m:Client:/, /^list:Client$/, /^by:Client:ws_1$/, /^\{accounts\}:/, /^settings$/, /^\{data:ws_1\}:/,
          /^\{apikeys\}:(key:forever|digest:digest-forever|workspace:ws_1)$/];
        const longest = (name: string) => name.startsWith('{revocations}') ? 40_000 : name.startsWith('{apikeys}') ? 50_000 : 60_000;
        const found = await keys();
        expect(found.size).to.be.greaterThan(engineModels.length * 2);
        for (const name of ['{data:ws_1}:r:companies:c1', '{apikeys}:key:soon', '{apikeys}:digest:digest-later', '{apikeys}:workspace:ws_2', 'by:Grant:usr_1', 'by:Client:ws_1']) {
          expect(found.has(prefix + name), name).to.equal(true);
        }
        for (const [key, ttl] of found) {
          const name = key.slice(prefix.length);
          if (kept.some((pattern) => pattern.test(name))) expect(ttl, key).to.equal(-1);
          else expect(ttl, key).to.be.within(1, longest(name));
        }
        // A workspace's key list lives as long as its longest-lived key.
        expect(found.get(`${prefix}{apikeys}:workspace:ws_2`)).to.be.greaterThan(40_000);
      });

      it('keeps a keyed create no longer than it is kept for, and leaves none behind once every record of its object is deleted', async () => {
        const at = new Date().toISOString();
        for (const [object, id] of [['companies', 'c1'], ['companies', 'c2'], ['people', 'p1']] as const) {
          await store.records.createOnce('ws_1', object, { id, createdAt: at, updatedAt: at, values: { name: id } }, { key: `k-${id}`, fingerprint: 'f', keptFor: 90 });
        }
        const { options } = backend.target(dir);
        const prefix = options!.keyPrefix!;
        const found = await keys();
        const keyed = [...found].filter(([key]) => /^\{data:ws_1\}:creates?:/.test(key.slice(prefix.length)));
        expect(keyed.map(([key]) => key.slice(prefix.length).replace(/:create:.*/, ':create:*')).sort())
          .to.deep.equal(['{data:ws_1}:create:*', '{data:ws_1}:create:*', '{data:ws_1}:create:*', '{data:ws_1}:creates:companies', '{data:ws_1}:creates:people']);
        for (const [key, ttl] of keyed) expect(ttl, key).to.be.within(80_000, 90_000);

        await store.records.deleteAll('ws_1', 'companies');
        await store.records.deleteAll('ws_1', 'people');
        await sleep(20);
        expect([...(await keys()).keys()]).to.deep.equal([]);
      });

      it('leaves no key behind once every data record and API key is deleted', async () => {
        const at = new Date().toISOString();
        const records: Array<[string, string, string]> = [['ws_1', 'companies', 'c1'], ['ws_1', 'companies', 'c2'], ['ws_1', 'people', 'p1'], ['ws_2', 'companies', 'c1']];
        for (const [workspaceId, object, id] of records) {
          await store.records.create(workspaceId, object, { id, createdAt: at, updatedAt: at, values: { name: id, employees: 3 } });
        }
        await store.records.update('ws_1', 'companies', 'c1', { employees: null, city: 'Paris' }, at);
        const now = Math.floor(Date.now() / 1000);
        await store.apiKeys.create({ id: 'k1', workspaceId: 'ws_1', name: 'one', digest: 'd1', hint: 'wsk_Ab', createdAt: now });
        await store.apiKeys.create({ id: 'k2', workspaceId: 'ws_1', name: 'two', digest: 'd2', hint: 'wsk_Cd', createdAt: now, expiresAt: now + 60 });
        await store.apiKeys.touch('k1', now);

        for (const [workspaceId, object, id] of records) expect(await store.records.delete(workspaceId, object, id)).to.equal(true);
        for (const id of ['k1', 'k2']) expect(await store.apiKeys.delete(id)).to.equal(true);
        // A position key outlives its object's last record while positions are ahead of the clock
        // (records created within one millisecond): a few milliseconds at most here.
        await sleep(20);
        expect([...(await keys()).keys()]).to.deep.equal([]);
      });

      it('finds the memberships stored before they were kept by workspace, and keeps the last admin of their workspaces', async () => {
        await store.accounts.createWorkspace({ id: 'ws_1', name: 'Acme', createdAt: 1 });
        for (const id of ['usr_1', 'usr_2']) {
          await store.accounts.createUser({ id, email: `${id}@example.com`, name: id, passwordHash: 'h', createdAt: 1 });
          await store.accounts.putMembership({ userId: id, workspaceId: 'ws_1', role: id === 'usr_1' ? 'admin' : 'member' });
        }
        const { url, options } = backend.target(dir);
        const keys = new RedisKeys(options!.keyPrefix!);
        const client = await rawRedis(url);
        try {
          // As an earlier version left them: memberships by user only.
          await client.del(keys.members('ws_1'), keys.membersIndexed());
        } finally {
          client.disconnect();
        }
        const reopened = open(backend, dir);
        try {
          expect((await reopened.accounts.listMembers('ws_1')).map(({ userId, role }) => `${userId}:${role}`).sort()).to.deep.equal(['usr_1:admin', 'usr_2:member']);
          let error: unknown;
          try {
            await reopened.accounts.removeMembership('usr_1', 'ws_1');
          } catch (caught) {
            error = caught;
          }
          expect(error).to.be.instanceOf(LastAdminError);
        } finally {
          await reopened.close();
        }
      });

      it('lists the sessions, grant workspaces and initial access tokens stored before they were listed, on every primary', async () => {
        const { url, options } = backend.target(dir);
        const keys = new RedisKeys(options!.keyPrefix!);
        const client = await rawRedis(url);
        try {
          // As a version that listed grants and clients only left them: each record, with its lifetime, in no listing.
          for (const [model, id, payload] of [
            ['Session', 's1', { accountId: 'usr_1' }], ['Session', 's2', { accountId: 'usr_1' }], ['Session', 's3', { accountId: 'usr_2' }],
            ['GrantWorkspace', 'g1', { grantId: 'g1', workspaceId: 'ws_1' }], ['InitialAccessToken', 'i1', { workspaceId: 'ws_1' }],
          ] as const) {
            await client.hset(keys.record(model, id), 'p', JSON.stringify(payload));
            await client.expire(keys.record(model, id), 600);
          }
        } finally {
          client.disconnect();
        }
        const reopened = open(backend, dir);
        try {
          expect((await reopened.model('Session').listBy('usr_1')).map(({ id }) => id).sort()).to.deep.equal(['s1', 's2']);
          expect((await reopened.model('GrantWorkspace').listBy('ws_1')).map(({ id }) => id)).to.deep.equal(['g1']);
          expect((await reopened.model('InitialAccessToken').listBy('ws_1')).map(({ id }) => id)).to.deep.equal(['i1']);
          // Listed as the records are: each entry goes with its record.
          await reopened.model('Session').destroy('s1');
          expect((await reopened.model('Session').listBy('usr_1')).map(({ id }) => id)).to.deep.equal(['s2']);
        } finally {
          await reopened.close();
        }
      });

      it('leaves no account key behind once every user and workspace is deleted', async () => {
        await store.accounts.createWorkspace({ id: 'ws_1', name: 'Acme', createdAt: 1 });
        await store.accounts.createWorkspace({ id: 'ws_2', name: 'Beta', createdAt: 1 });
        for (const id of ['usr_1', 'usr_2']) {
          await store.accounts.createUser({ id, email: `${id}@example.com`, name: id, passwordHash: 'h', createdAt: 1 });
          await store.accounts.putMembership({ userId: id, workspaceId: 'ws_1', role: 'admin' });
          await store.accounts.putMembership({ userId: id, workspaceId: 'ws_2', role: 'member' });
        }
        await store.accounts.setPasswordHash('usr_1', 'h2');
        await store.accounts.removeMembership('usr_2', 'ws_2');
        expect(await store.accounts.deleteUser('usr_2')).to.equal(true);
        expect(await store.accounts.deleteWorkspace('ws_1')).to.equal(true);
        expect(await store.accounts.deleteUser('usr_1')).to.equal(true);
        expect(await store.accounts.deleteWorkspace('ws_2')).to.equal(true);
        const { options } = backend.target(dir);
        // Only the mark that memberships are kept by workspace, set once.
        expect([...(await keys()).keys()]).to.deep.equal([`${options!.keyPrefix!}{accounts}:members-indexed`]);
      });

      it('leaves no key behind once a grant is revoked and its other records destroyed', async () => {
        for (const name of ['AccessToken', 'RefreshToken', 'AuthorizationCode']) {
          await store.model(name).upsert('one', { grantId: 'g1' }, 60);
          await store.model(name).upsert('two', { grantId: 'g1' }, 30);
        }
        await store.model('DeviceCode').upsert('d1', { grantId: 'g1', userCode: 'CODE-1' }, 60);
        await store.model('Session').upsert('s1', { uid: 'uid-1' }, 60);
        await store.model('Client').upsert('c1', { client_id: 'c1', workspace_id: 'ws_1' }, undefined);
        await store.model('Grant').upsert('g1', { accountId: 'usr_1', clientId: 'c1' }, 60);
        for (const name of ['AccessToken', 'RefreshToken', 'AuthorizationCode', 'DeviceCode']) await store.model(name).revokeByGrantId('g1');
        await store.model('Session').destroy('s1');
        await store.model('Client').destroy('c1');
        await store.model('Grant').destroy('g1');
        expect([...(await keys()).keys()]).to.deep.equal([]);
      });

      it('drops an expired member from a grant index when the index is next touched, and expires the index with its last member', async () => {
        const model = store.model('AccessToken');
        await model.upsert('short', { grantId: 'g1' }, 1);
        await model.upsert('long', { grantId: 'g1' }, 3);
        await sleep(1200);
        await model.upsert('later', { grantId: 'g1' }, 2);
        const { url, options } = backend.target(dir);
        const index = new RedisKeys(options!.keyPrefix!).grant('AccessToken', 'g1');
        const client = await rawRedis(url);
        try {
          // By expiry: 'long' ends about 1.8 s from now, 'later' 2 s from now, and the index with it.
          expect(await client.zrange(index, 0, '-1')).to.deep.equal(['long', 'later']);
          expect(await client.pttl(index)).to.be.within(1500, 2000);
          await sleep(2100);
          expect(await client.exists(index)).to.equal(0);
        } finally {
          client.disconnect();
        }
      });
    });

    it('answers ping while open and reports unavailability once closed', async () => {
      await store.ping();
      await store.close();
      let error: unknown;
      try {
        await store.ping();
      } catch (caught) {
        error = caught;
      }
      expect(error).to.be.instanceOf(BackendUnavailableError);
    });
  });
}

describe('sqlite store file', () => {
  it('answers a full disk and a file it may not write to as the store unavailable (503), not a failure of the request', async () => {
    const db = new DatabaseSync(':memory:');
    db.exec(MODELS_SCHEMA);
    // The page limit stands in for the disk: past it SQLite answers SQLITE_FULL, "database or disk is full".
    const { page_count: pages } = db.prepare('PRAGMA page_count').get() as { page_count: number };
    db.exec(`PRAGMA max_page_count = ${pages + 1}`);
    const connection = new SqliteConnection(db);
    const models = new SqliteModelStore(connection, 'Client');
    const full = await models.upsert('c1', { client_id: 'c1', padding: 'x'.repeat(100_000) }, undefined).then(() => undefined, (error: unknown) => error);
    expect(full).to.be.instanceOf(BackendUnavailableError);
    expect((full as Error).message).to.contain('full');
    connection.flush();
    db.exec('PRAGMA query_only = ON');
    const readOnly = await models.upsert('c2', { client_id: 'c2' }, undefined).then(() => undefined, (error: unknown) => error);
    expect(readOnly, 'a file that may not be written to').to.be.instanceOf(BackendUnavailableError);
    db.close();
  });

  it('hands out a claim on a code or refresh token only once its consumption is committed: one the commit undid is an outage', async () => {
    const db = new DatabaseSync(':memory:');
    db.exec(MODELS_SCHEMA);
    // A constraint checked only at COMMIT makes the commit of the transaction the consumption is in fail, as a full disk does.
    db.exec('PRAGMA foreign_keys = ON; CREATE TABLE parent (id TEXT PRIMARY KEY); CREATE TABLE child (parent TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)');
    const connection = new SqliteConnection(db);
    const tokens = new SqliteModelStore(connection, 'RefreshToken');
    await tokens.upsert('rt1', { grantId: 'g1' }, 60);
    await connection.committed();
    const consumed = tokens.consume('rt1');
    await connection.write(() => connection.statement("INSERT INTO child VALUES ('nobody')").run());
    const outcome = await consumed.then((claim) => claim, (error: unknown) => error);
    expect(outcome, 'no claim from a consumption that was undone').to.not.be.a('string');
    // Undone indeed: the token is still there to redeem, by the client's retry.
    expect(await tokens.consume('rt1')).to.be.a('string');
    db.close();
  });

  it('keeps data across reopening the same file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-'));
    try {
      const url = `sqlite:${join(dir, 'nested', 'db.sqlite')}`;
      const first = openStore(url);
      await first.model('Client').upsert('c', { client_id: 'c' }, undefined);
      await first.close();
      const second = openStore(url);
      expect(await second.model('Client').find('c')).to.deep.equal({ client_id: 'c' });
      await second.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps no record created under a key without its key: when keeping the key fails, the record is not kept either', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-'));
    try {
      const path = join(dir, 'db.sqlite');
      await openStore(`sqlite:${path}`).close();
      // Another connection makes the second statement of the create fail, as a full disk could.
      const other = new DatabaseSync(path);
      other.exec("PRAGMA busy_timeout = 5000; CREATE TRIGGER refuse_keys BEFORE INSERT ON record_creates BEGIN SELECT RAISE(ABORT, 'no room'); END");
      const store = openStore(`sqlite:${path}`);
      const at = new Date().toISOString();
      const record = (id: string) => ({ id, createdAt: at, updatedAt: at, values: { name: id } });
      const keyed = { key: 'k1', fingerprint: 'f1', keptFor: 60 };
      let failure: unknown;
      await store.records.createOnce('ws_1', 'companies', record('c1'), keyed).catch((error: unknown) => { failure = error; });
      expect(String(failure)).to.include('no room');
      await store.committed();
      other.exec('DROP TRIGGER refuse_keys');
      other.close();
      expect((await store.records.list('ws_1', 'companies', 0, 10)).total, 'the record of the failed create').to.equal(0);
      expect(await store.records.createOnce('ws_1', 'companies', record('c2'), keyed)).to.have.key('created');
      expect((await store.records.list('ws_1', 'companies', 0, 10)).records.map((r) => r.id)).to.deep.equal(['c2']);
      await store.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('opens a database made before uses were counted, keeps its records and counts their uses', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-'));
    try {
      const path = join(dir, 'old.sqlite');
      const old = new DatabaseSync(path);
      old.exec(`CREATE TABLE oidc_models (model TEXT NOT NULL, id TEXT NOT NULL, payload TEXT NOT NULL, grant_id TEXT, uid TEXT,
        user_code TEXT, consumed_at INTEGER, expires_at INTEGER, PRIMARY KEY (model, id))`);
      old.prepare('INSERT INTO oidc_models (model, id, payload, expires_at) VALUES (?, ?, ?, ?)')
        .run('InitialAccessToken', 't1', '{"kind":"InitialAccessToken"}', Math.floor(Date.now() / 1000) + 60);
      old.close();
      // The first store to open it adds the column; the second finds it there.
      const [first, second] = [openStore(`sqlite:${path}`), openStore(`sqlite:${path}`)];
      try {
        expect(await first.model('InitialAccessToken').find('t1')).to.deep.equal({ kind: 'InitialAccessToken' });
        expect(await first.model('InitialAccessToken').countUse('t1', 1)).to.equal(1);
        await first.committed();
        expect(await second.model('InitialAccessToken').countUse('t1', 1)).to.equal(0);
      } finally {
        await first.close();
        await second.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('opens a database made before records were listed, and lists the grants and clients it already held', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-'));
    try {
      const path = join(dir, 'old.sqlite');
      const old = new DatabaseSync(path);
      old.exec(`CREATE TABLE oidc_models (model TEXT NOT NULL, id TEXT NOT NULL, payload TEXT NOT NULL, grant_id TEXT, uid TEXT,
        user_code TEXT, consumed_at INTEGER, expires_at INTEGER, uses INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (model, id))`);
      const insert = old.prepare('INSERT INTO oidc_models (model, id, payload, expires_at) VALUES (?, ?, ?, ?)');
      insert.run('Grant', 'g1', '{"accountId":"usr_1"}', Math.floor(Date.now() / 1000) + 60);
      insert.run('Client', 'c1', '{"client_id":"c1","workspace_id":"ws_1"}', null);
      insert.run('Session', 's1', '{"accountId":"usr_1"}', Math.floor(Date.now() / 1000) + 60);
      old.close();
      const store = openStore(`sqlite:${path}`);
      try {
        expect(await store.model('Grant').listBy('usr_1')).to.deep.equal([{ id: 'g1', payload: { accountId: 'usr_1' } }]);
        expect((await store.model('Client').listBy('ws_1')).map(({ id }) => id)).to.deep.equal(['c1']);
        expect((await store.model('Session').listBy('usr_1')).map(({ id }) => id)).to.deep.equal(['s1']);
        expect(await store.model('AccessToken').listBy('usr_1')).to.deep.equal([]);
      } finally {
        await store.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('opens a database made before sessions, grant workspaces and initial access tokens were listed, and lists those it held', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-'));
    try {
      const path = join(dir, 'old.sqlite');
      // As the version that listed grants and clients only left it: the column there, sessions not in it.
      const first = openStore(`sqlite:${path}`);
      await first.close();
      const old = new DatabaseSync(path);
      old.exec('PRAGMA user_version = 0');
      const insert = old.prepare('INSERT INTO oidc_models (model, id, payload, expires_at) VALUES (?, ?, ?, ?)');
      insert.run('Session', 's1', '{"accountId":"usr_1"}', Math.floor(Date.now() / 1000) + 60);
      insert.run('GrantWorkspace', 'g1', '{"grantId":"g1","workspaceId":"ws_1"}', Math.floor(Date.now() / 1000) + 60);
      old.close();
      const store = openStore(`sqlite:${path}`);
      try {
        expect((await store.model('Session').listBy('usr_1')).map(({ id }) => id)).to.deep.equal(['s1']);
        expect((await store.model('GrantWorkspace').listBy('ws_1')).map(({ id }) => id)).to.deep.equal(['g1']);
      } finally {
        await store.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('opens a database made before records had positions of their own, and pages its records in the order they were made', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-'));
    try {
      const path = join(dir, 'old.sqlite');
      const old = new DatabaseSync(path);
      old.exec(`CREATE TABLE records (seq INTEGER PRIMARY KEY AUTOINCREMENT, workspace_id TEXT NOT NULL, object TEXT NOT NULL, id TEXT NOT NULL,
        data TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (workspace_id, object, id));
        CREATE INDEX records_page ON records (workspace_id, object, seq)`);
      const insert = old.prepare("INSERT INTO records (workspace_id, object, id, data, created_at, updated_at) VALUES ('ws_1', 'companies', ?, '{}', '', '')");
      for (const id of ['c1', 'c2', 'c3']) insert.run(id);
      old.close();
      const store = openStore(`sqlite:${path}`);
      try {
        const first = await store.records.list('ws_1', 'companies', 0, 2);
        expect(first.records.map((r) => r.id)).to.deep.equal(['c1', 'c2']);
        const at = new Date().toISOString();
        await store.records.create('ws_1', 'companies', { id: 'c4', createdAt: at, updatedAt: at, values: {} });
        const rest = await store.records.list('ws_1', 'companies', first.records[1]!.position, 10);
        expect(rest.records.map((r) => r.id)).to.deep.equal(['c3', 'c4']);
      } finally {
        await store.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('has every write on disk for every other connection once committed() resolves (group commit)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-'));
    const url = `sqlite:${join(dir, 'db.sqlite')}`;
    const [writer, reader] = [openStore(url), openStore(url)];
    try {
      // Both connections are in this process: the reader only reads, so it never waits for the writer's lock.
      await Promise.all(Array.from({ length: 20 }, (_, i) => writer.model('RefreshToken').upsert(`r${i}`, { jti: `r${i}` }, 60)));
      await writer.committed();
      for (let i = 0; i < 20; i += 1) expect(await reader.model('RefreshToken').find(`r${i}`), `r${i}`).to.deep.equal({ jti: `r${i}` });
    } finally {
      await writer.close();
      await reader.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('lets a write wait for the write lock another process holds without stopping this one, and stores it once the lock is free', () => besideAnotherProcess(async (store, other, path) => {
    await store.model('Client').upsert('before', { client_id: 'before' }, undefined);
    await store.committed();
    other.exec('BEGIN IMMEDIATE');
    let settled = false;
    const waiting = store.model('Client').upsert('during', { client_id: 'during' }, undefined).finally(() => { settled = true; });
    // Timers fire and reads answer meanwhile: SQLite's own busy wait would have held the event loop.
    await sleep(200);
    expect(await store.model('Client').find('before')).to.deep.equal({ client_id: 'before' });
    expect(settled, 'the write went ahead while another process held the lock').to.equal(false);
    other.exec('COMMIT');
    await waiting;
    await store.committed();
    const reopened = openStore(`sqlite:${path}`);
    expect(await reopened.model('Client').find('during')).to.deep.equal({ client_id: 'during' });
    await reopened.close();
  }));

  it('opens while another process holds the write lock (an instance starting beside busy ones), and reads at once', () => besideAnotherProcess(async (store, other, path) => {
    await store.model('Client').upsert('held', { client_id: 'held' }, undefined);
    await store.committed();
    other.exec('BEGIN IMMEDIATE');
    const second = openStore(`sqlite:${path}`);
    try {
      expect(await second.model('Client').find('held')).to.deep.equal({ client_id: 'held' });
    } finally {
      await second.close();
      other.exec('COMMIT');
    }
  }));

  it('fails a write as the store unavailable when another process holds the write lock for 5 s, and writes again once it is free', () => besideAnotherProcess(async (store, other) => {
    other.exec('BEGIN IMMEDIATE');
    const failures = await Promise.all(['late', 'later'].map((id) => store.model('Client').upsert(id, { client_id: id }, undefined).then(() => undefined, (error: unknown) => error)));
    for (const failure of failures) expect(failure).to.be.instanceOf(BackendUnavailableError);
    other.exec('COMMIT');
    await store.model('Client').upsert('after', { client_id: 'after' }, undefined);
    await store.committed();
    expect(await store.model('Client').find('after')).to.deep.equal({ client_id: 'after' });
    expect(await store.model('Client').find('late')).to.equal(undefined);
    expect(await store.model('Client').find('later')).to.equal(undefined);
  }));

  it('while another process writes to the file too, frees the write lock once a write has run, not at the end of the event-loop turn', () => besideAnotherProcess(async (store, other) => {
    const tryLock = () => {
      try {
        other.exec('BEGIN IMMEDIATE');
        other.exec('COMMIT');
        return true;
      } catch {
        return false;
      }
    };
    const freeBeforeTurnEnds = async (id: string) => {
      await store.model('Client').upsert(id, { client_id: id }, undefined);
      // Ticks run before the turn's end (setImmediate), once the promise callbacks queued before them have.
      await new Promise((resolve) => process.nextTick(resolve));
      return tryLock();
    };
    expect(await freeBeforeTurnEnds('alone'), 'alone on the file, the turn\'s writes share one commit').to.equal(false);
    await store.committed();
    // Another process takes the lock for a moment: the store's next write waits for it.
    other.exec('BEGIN IMMEDIATE');
    const waited = store.model('Client').upsert('waited', { client_id: 'waited' }, undefined);
    await sleep(20);
    other.exec('COMMIT');
    await waited;
    await store.committed();
    expect(await freeBeforeTurnEnds('contended'), 'the lock is free for the other process').to.equal(true);
    expect(await store.model('Client').find('contended')).to.deep.equal({ client_id: 'contended' });
  }));

  it('stores every write of two stores writing to one file at once, as workers do', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-'));
    const url = `sqlite:${join(dir, 'db.sqlite')}`;
    const stores = [openStore(url), openStore(url)];
    try {
      // Each store's writes come over several event-loop turns, so each waits for the other's lock
      // again and again; what one has committed, the other reads.
      await Promise.all(Array.from({ length: 40 }, async (_, i) => {
        await sleep(i % 8);
        await Promise.all(stores.map(async (store, s) => {
          await store.model('RefreshToken').upsert(`r${s}-${i}`, { jti: `r${s}-${i}` }, 60);
          await store.committed();
          expect(await stores[1 - s]!.model('RefreshToken').find(`r${s}-${i}`), `r${s}-${i}`).to.deep.equal({ jti: `r${s}-${i}` });
        }));
      }));
    } finally {
      await Promise.all(stores.map((store) => store.close()));
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('rejects an unknown storage URL with a clear message', () => {
    expect(() => openStore('postgres://x')).to.throw(/unsupported storage URL/);
  });
});

/**
 * Runs `test` with a SQLite store on a fresh file and a plain connection to the same file, which
 * stands for another process (a worker, the admin CLI, a `sqlite3` shell) and never waits for a lock.
 */
async function besideAnotherProcess(test: (store: Store, other: DatabaseSync, path: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'store-'));
  const path = join(dir, 'db.sqlite');
  const store = openStore(`sqlite:${path}`);
  const other = new DatabaseSync(path, { timeout: 0 });
  try {
    await store.ping();
    await test(store, other, path);
  } finally {
    if (other.isTransaction) other.exec('ROLLBACK');
    other.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Runs `count` processes that each open the store and consume every id at the same moment (or,
 * given `useLimit`, count a use of each); their results, per process.
 */
function consumeInProcesses(count: number, url: string, keyPrefix: string, model: string, ids: string[], useLimit?: number): Promise<Array<Array<boolean | number>>> {
  const args = [url, keyPrefix, model, ids.join(','), ...(useLimit === undefined ? [] : [String(useLimit)])];
  return inProcesses('consume_child.ts', Array.from({ length: count }, () => args));
}

/**
 * Runs a child script of this folder once per argument list, all started together once each has
 * said it is ready; what each printed as its result (JSON), in the same order.
 */
async function inProcesses<T>(name: string, argLists: string[][]): Promise<T[]> {
  const script = fileURLToPath(new URL(`./${name}`, import.meta.url));
  const children = argLists.map((args, i) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
    let output = '';
    const closed = once(child, 'close');
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.startsWith('ready\n')) resolve();
      });
      closed.then(() => reject(new Error(`${name} ${i} exited before it was ready: ${output}`)), reject);
    });
    return { child, ready, closed, output: () => output };
  });
  try {
    await Promise.all(children.map(({ ready }) => ready));
    for (const { child } of children) child.stdin.end('go\n');
    await Promise.all(children.map(({ closed }) => closed));
    return children.map(({ output }) => JSON.parse(output().split('\n')[1]!) as T);
  } finally {
    for (const { child } of children) if (child.exitCode === null) child.kill();
  }
}
