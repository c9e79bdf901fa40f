import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';

import { openStore, type Store } from '../../adapters/index.ts';
import { loadConfig } from '../../config/index.ts';
import { Accounts } from '../../src/accounts/accounts.ts';
import { QuickstartError } from '../../src/cli/quickstart_error.ts';
import { createRecords, type Writers } from '../../src/cli/quickstart_records.ts';
import { buildProvider } from '../../src/engine/provider.ts';
import { loadKeyRing } from '../../src/keys/key_encryption.ts';
import { loadKeys } from '../../src/keys/keys.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { RevocationList } from '../../src/tokens/revocation_list.ts';

/**
 * What quickstart writes, all or nothing, on a real SQLite file with the engine configured as the
 * service configures it. The failure is the engine's own: a redirect URI its Client validation
 * refuses, at the last write, after the admin, the workspace and the membership are written.
 */
describe('quickstart records', function () {
  this.timeout(20_000);

  let dir: string;
  let store: Store;
  let writers: Writers;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oauth-quickstart-records-'));
    const config = loadConfig({ STORE: `sqlite:${join(dir, 'oauth.sqlite')}`, XDG_CONFIG_HOME: join(dir, 'config') });
    store = openStore(config.store);
    const accounts = new Accounts(store.accounts);
    const keys = await loadKeys(store.settings, await loadKeyRing(config, createLogger('silent')), undefined);
    const { provider } = buildProvider({ config, store, accounts, keys, revocations: new RevocationList(store.revocations) });
    writers = { accounts, provider, clients: store.model('Client') };
  });

  after(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const admin = { workspaceName: 'Acme', email: `rollback-${randomBytes(4).toString('hex')}@example.com`, name: 'Rol Back', password: 'a long password' };

  it('a write refused after others takes back the admin, the workspace and the membership, and says so; the same run again succeeds', async () => {
    const refused = await createRecords(writers, admin, 'http://127.0.0.1:8976/callback#fragment').then(() => undefined, (error: unknown) => error);
    expect(refused).to.be.instanceOf(QuickstartError);
    expect((refused as Error).message).to.match(/must not contain fragments; what had been written was removed, so quickstart can run again$/);
    expect(await store.accounts.countUsers()).to.equal(0);
    expect(await store.accounts.findUserByEmail(admin.email)).to.equal(undefined);
    expect(await store.accounts.listWorkspaces()).to.deep.equal([]);
    expect(await store.model('Client').list()).to.deep.equal([]);

    const created = await createRecords(writers, admin, 'http://127.0.0.1:8976/callback');
    expect(created.user.email).to.equal(admin.email);
    expect(await writers.accounts.roleIn(created.user.id, created.workspace.id)).to.equal('admin');
    expect((await store.model('Client').listBy(created.workspace.id)).map(({ id }) => id)).to.deep.equal([created.client.client_id]);
  });
});
