import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';
import { Accounts } from '../../src/accounts/accounts.ts';
import { MAX_PENDING_INVITATIONS, invitationsOver, type WorkspaceInvitations } from '../../src/settings/invitations.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

/**
 * The settings area's invitation links on SQLite and on Redis, with requests at the same moment:
 * two people accepting one link make one member, and creates racing for a workspace's last place
 * make one invitation (the bound holds however many admins press at once).
 */
describe('the settings area\'s invitations, used at the same moment', function () {
  this.timeout(30_000);

  let dir: string;
  let redis: RedisServer;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'settings-invitations-'));
    redis = await startRedis();
  });

  after(async () => {
    await redis?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  for (const backend of ['sqlite', 'redis'] as const) {
    describe(backend, () => {
      let store: Store;
      let accounts: Accounts;
      let invitations: WorkspaceInvitations;

      before(() => {
        store = openStore(backend === 'sqlite' ? `sqlite:${join(dir, 'store.sqlite')}` : redis.url, backend === 'redis' ? { keyPrefix: 'invitations:' } : {});
        accounts = new Accounts(store.accounts);
        invitations = invitationsOver(store, accounts);
      });

      after(async () => {
        await store?.close();
      });

      let seq = 0;
      const person = (name: string) => {
        seq += 1;
        return { email: `${name}-${seq}@${backend}.invitations.example`, name, password: 'correct horse battery staple' };
      };

      /** A workspace with its admin. */
      async function workspaceWithAdmin(name: string) {
        const workspace = await accounts.createWorkspace(name);
        const { user } = await accounts.createMember(person('admin'), workspace.id, 'admin');
        return { workspace, admin: user };
      }

      it('adds one member when two people accept one link at once; the other finds it used', async () => {
        const { workspace, admin } = await workspaceWithAdmin('Race Ltd');
        const created = await invitations.create(workspace.id, 'member', admin.id);
        if ('refused' in created) throw new Error(created.refused.error);
        const people = await Promise.all(['one', 'two'].map((name) => accounts.createUser(person(name))));

        const accepted = await Promise.all(people.map(({ id }) => invitations.accept(created.secret, id)));
        expect(accepted.filter((outcome) => 'joined' in outcome), 'one joined').to.have.length(1);
        expect(accepted.filter((outcome) => 'invalid' in outcome), 'one found it used').to.have.length(1);
        const roles = await Promise.all(people.map(({ id }) => accounts.roleIn(id, workspace.id)));
        expect(roles.filter((role) => role === 'member')).to.have.length(1);
        expect(await invitations.pending(workspace.id)).to.deep.equal([]);
      });

      it(`makes one invitation when creates race for the workspace's last place of ${MAX_PENDING_INVITATIONS}, and frees a place with a cancellation`, async () => {
        const { workspace, admin } = await workspaceWithAdmin('Crowded Ltd');
        for (let made = 1; made < MAX_PENDING_INVITATIONS; made += 1) await invitations.create(workspace.id, 'member', admin.id);
        const racing = await Promise.all(Array.from({ length: 4 }, () => invitations.create(workspace.id, 'viewer', admin.id)));
        expect(racing.filter((outcome) => 'invitation' in outcome), 'one made').to.have.length(1);
        expect(racing.filter((outcome) => 'refused' in outcome).map((outcome) => 'refused' in outcome && outcome.refused.status)).to.deep.equal([409, 409, 409]);
        const pending = await invitations.pending(workspace.id);
        expect(pending).to.have.length(MAX_PENDING_INVITATIONS);

        expect('refused' in await invitations.create(workspace.id, 'member', admin.id), 'full').to.equal(true);
        expect((await invitations.cancel(workspace.id, pending[0]!.id))?.id).to.equal(pending[0]!.id);
        expect('invitation' in await invitations.create(workspace.id, 'member', admin.id), 'a place freed').to.equal(true);
      });
    });
  }
});
