import { ROLES } from '../../adapters/store.ts';
import { UserAccess } from '../engine/user_access.ts';
import { existingWorkspace, namedUser, requiredRole, waitForPropagation, type Command } from './command.ts';
import { invitationsOver } from '../settings/invitations.ts';
import { plural } from '../shared/words.ts';

/** The admin CLI's `member` commands: who belongs to a workspace, with which role. */

const NAMED = '(--email EMAIL | --user USER_ID)';
const ROLE = `--role ${ROLES.join('|')}`;

const add: Command = {
  name: 'member add',
  synopsis: `--workspace WORKSPACE_ID ${NAMED} ${ROLE}`,
  description: 'Makes an existing user a member of the workspace with the role (or changes their role if they are one).',
  options: ['workspace', 'email', 'user', 'role'],
  async run({ store, accounts, options }) {
    const role = requiredRole(options);
    const workspaceId = await existingWorkspace(accounts, options);
    const user = await namedUser(accounts, options);
    const membership = await accounts.addMember(user.id, workspaceId, role);
    // A role changed away from admin: their invitation links are deleted, for good.
    if (membership.role !== 'admin') await invitationsOver(store, accounts).voidInvitationsBy(workspaceId, user.id);
    return { text: `${user.email} (${user.id}) is now ${membership.role} of ${workspaceId}`, json: shownMembership(membership) };
  },
};

const setRole: Command = {
  name: 'member set-role',
  synopsis: `--workspace WORKSPACE_ID ${NAMED} ${ROLE}`,
  description: 'Changes a member\'s role. A demotion applies to their tokens within the propagation bound; a promotion\n'
    + 'with their next token. The last admin of a workspace cannot be demoted.',
  options: ['workspace', 'email', 'user', 'role'],
  async run({ store, accounts, options }) {
    const role = requiredRole(options);
    const workspaceId = await existingWorkspace(accounts, options);
    const user = await namedUser(accounts, options);
    const membership = await accounts.setRole(user.id, workspaceId, role);
    // No longer an admin: their invitation links are deleted, so that being made one again revives none.
    if (membership.role !== 'admin') await invitationsOver(store, accounts).voidInvitationsBy(workspaceId, user.id);
    return { text: `${user.email} (${user.id}) is now ${membership.role} of ${workspaceId}`, json: shownMembership(membership) };
  },
};

const remove: Command = {
  name: 'member remove',
  synopsis: `--workspace WORKSPACE_ID ${NAMED}`,
  description: 'Ends the user\'s membership and revokes the applications they allowed for the workspace: their tokens\n'
    + 'for it are refused on every instance by the time the command returns. The last admin of a workspace\n'
    + 'cannot be removed.',
  options: ['workspace', 'email', 'user'],
  async run({ store, accounts, options, engine }) {
    const workspaceId = await existingWorkspace(accounts, options);
    const user = await namedUser(accounts, options);
    // The engine first (it needs the keys): a start it refuses changes nothing.
    const access = new UserAccess({ store, ...await engine() });
    // The grants first, so a removal cut short (the store failing) leaves none to come back should
    // the user be added again; and once more after it, for one they allowed meanwhile.
    await accounts.refuseRemovingLastAdmin(user.id, [workspaceId]);
    let grants = await access.revokeGrants(user.id, { workspaceId });
    const membership = await accounts.removeMember(user.id, workspaceId);
    grants += await access.revokeGrants(user.id, { workspaceId });
    await invitationsOver(store, accounts).voidInvitationsBy(workspaceId, user.id);
    await waitForPropagation();
    return {
      text: `${user.email} (${user.id}) is no longer a member of ${workspaceId}; ${plural(grants, 'grant')} revoked`,
      json: { ...shownMembership(membership), removed: true, grants_revoked: grants },
    };
  },
};

export const MEMBER_COMMANDS: readonly Command[] = [add, setRole, remove];

function shownMembership(membership: { userId: string; workspaceId: string; role: string }) {
  return { user_id: membership.userId, workspace_id: membership.workspaceId, role: membership.role };
}
