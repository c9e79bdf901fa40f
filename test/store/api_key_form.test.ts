import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';
import { ApiKeys } from '../../src/api_keys/api_keys.ts';
import { newFormId } from '../../src/settings/form_ids.ts';
import { WorkspaceAdmin } from '../../src/settings/workspace_admin.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

/**
 * The settings area's create-key form sent several times at once (a double submit): one key, the
 * other copies refused, on a store where the check and the write are separate round trips (Redis)
 * as on the embedded one; and each form shown making its key, whatever happened to the keys since.
 */
describe('the API key create form, sent several times at once', function () {
  this.timeout(30_000);

  let redis: RedisServer;
  let dir: string;

  before(async () => {
    redis = await startRedis();
    dir = await mkdtemp(join(tmpdir(), 'api-key-form-'));
  });

  after(async () => {
    await redis?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  for (const [name, url] of [['redis', () => redis.url], ['sqlite', () => `sqlite:${join(dir, 'store.sqlite')}`]] as const) {
    it(`makes one key, and answers the other copies 409 (${name})`, async () => {
      const store: Store = openStore(url(), { keyPrefix: `form-${name}:` });
      try {
        const admin = new WorkspaceAdmin({ apiKeys: new ApiKeys(store.apiKeys), markers: store.model('ReplayDetection') });
        const form = { name: 'twice', expires_in: '30d', form_id: newFormId() };
        const answers = await Promise.all(Array.from({ length: 5 }, () => admin.createKey('ws_form', form)));
        expect(answers.filter((answer) => 'key' in answer), 'keys made').to.have.length(1);
        expect(answers.filter((answer) => 'error' in answer).map((answer) => ('status' in answer ? answer.status : undefined))).to.deep.equal([409, 409, 409, 409]);
        expect(await store.apiKeys.list('ws_form')).to.have.length(1);

        // The next form shown makes the next one.
        expect(await admin.createKey('ws_form', { ...form, name: 'the next', form_id: newFormId() })).to.have.property('key');
        expect(await store.apiKeys.list('ws_form')).to.have.length(2);
      } finally {
        await store.close();
      }
    });

    it(`makes a key from a form shown after the newest key was revoked, and none from the first form sent again (${name})`, async () => {
      const store: Store = openStore(url(), { keyPrefix: `revoked-${name}:` });
      try {
        const admin = new WorkspaceAdmin({ apiKeys: new ApiKeys(store.apiKeys), markers: store.model('ReplayDetection') });
        const first = { name: 'by mistake', expires_in: '30d', form_id: newFormId() };
        const made = await admin.createKey('ws_revoked', first);
        expect(made).to.have.property('key');
        expect(await admin.revokeKey('ws_revoked', (made as { record: { id: string } }).record.id)).to.equal(true);

        expect(await admin.createKey('ws_revoked', { name: 'the right one', expires_in: '30d', form_id: newFormId() }), 'a form shown since').to.have.property('key');
        expect(await admin.createKey('ws_revoked', first), 'the first form sent again').to.deep.include({ status: 409 });
        expect(await admin.createKey('ws_revoked', { name: 'no id', expires_in: '30d' }), 'a form shown without an id').to.deep.include({ status: 400 });
        expect((await store.apiKeys.list('ws_revoked')).map((key) => key.name)).to.deep.equal(['the right one']);
      } finally {
        await store.close();
      }
    });
  }
});
