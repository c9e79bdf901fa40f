import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';
import { Accounts } from '../../src/accounts/accounts.ts';
import type { UserAccess } from '../../src/engine/user_access.ts';
import { WorkspaceMembers } from '../../src/settings/members.ts';

/**
 * Two admins of a workspace demoting each other in the settings area at the same moment: the
 * page's checks pass for both, the store lets one win, and the other is told in the page's words.
 */
describe('the settings area\'s member changes, made at the same moment', function () {
  this.timeout(30_000);

  let dir: string;
  let store: Store;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'settings-members-'));
    store = openStore(`sqlite:${join(dir, 'store.sqlite')}`);
  });

  after(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps an admin, and says why to the loser as the page does, not with the admin CLI\'s advice to delete the workspace', async () => {
    const accounts = new Accounts(store.accounts);
    // Role changes revoke nothing: the engine's side (UserAccess) is used only by a removal.
    const members = new WorkspaceMembers({ accounts, userAccess: undefined as unknown as UserAccess });
    const workspace = await accounts.createWorkspace('Each Other Ltd');
    const [first, second] = await Promise.all(['one', 'two'].map(async (name) => (await accounts.createMember(
      { email: `${name}@each-other.example`, name: `Admin ${name}`, password: 'correct horse battery staple' }, workspace.id, 'admin',
    )).user));

    const changes = await Promise.all([first!, second!].map((user) => members.setRole(workspace.id, user.id, 'member')));
    const refused = changes.flatMap((change) => ('refused' in change ? [change.refused] : []));
    expect(refused, 'exactly one refused').to.have.length(1);
    expect(refused[0]!.status).to.equal(409);
    expect(refused[0]!.error).to.match(/^Admin (one|two) is this workspace’s only admin, so they cannot be made a member: a workspace always keeps an admin\. Make another member an admin first\.$/);
    expect((await accounts.listMembers(workspace.id)).filter(({ role }) => role === 'admin')).to.have.length(1);
  });
});
