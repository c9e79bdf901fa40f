import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';

import { openStore } from '../adapters/index.ts';
import { BackendUnavailableError, DuplicateError, type Store } from '../adapters/store.ts';

/**
 * The contract every storage backend passes. Later backends (redis) join the BACKENDS list.
 */
const BACKENDS: Array<{ name: string; open: (dir: string) => Store }> = [
  { name: 'sqlite file', open: (dir) => openStore(`sqlite:${join(dir, 'contract.sqlite')}`) },
  { name: 'memory', open: () => openStore('memory:') },
];

for (const backend of BACKENDS) {
  describe(`store contract: ${backend.name}`, () => {
    let dir: string;
    let store: Store;

    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), 'store-'));
      store = backend.open(dir);
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

      it('does not return expired records', async () => {
        await store.model('AuthorizationCode').upsert('c1', { jti: 'c1' }, 1);
        expect(await store.model('AuthorizationCode').find('c1')).to.deep.equal({ jti: 'c1' });
        await new Promise((resolve) => setTimeout(resolve, 2100));
        expect(await store.model('AuthorizationCode').find('c1')).to.equal(undefined);
        expect(await store.model('AuthorizationCode').list()).to.deep.equal([]);
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
        expect(await model.consume('missing')).to.equal(false);
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
    });

    describe('settings', () => {
      it('keeps the first value written', async () => {
        expect(await store.settings.get('k')).to.equal(undefined);
        const results = await Promise.all([store.settings.setIfAbsent('k', 'one'), store.settings.setIfAbsent('k', 'two')]);
        expect(results[0]).to.equal(results[1]);
        expect(await store.settings.get('k')).to.equal(results[0]);
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

      it('forgets an entry once it has expired', async () => {
        await store.revocations.add({ key: 'token:short', issuedBefore: now() + 1, expiresAt: now() + 1 });
        await store.revocations.add({ key: 'token:long', issuedBefore: now() + 60, expiresAt: now() + 60 });
        expect((await store.revocations.changesSince(0)).entries.map((e) => e.key)).to.deep.equal(['token:short', 'token:long']);
        await new Promise((resolve) => setTimeout(resolve, 2100));
        expect((await store.revocations.changesSince(0)).entries.map((e) => e.key)).to.deep.equal(['token:long']);
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

  it('rejects an unknown storage URL with a clear message', () => {
    expect(() => openStore('postgres://x')).to.throw(/unsupported storage URL/);
  });
});
