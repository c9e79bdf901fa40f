import { ROLES } from '../../adapters/store.ts';
import type { UserWithMemberships } from '../accounts/accounts.ts';
import { UserAccess } from '../engine/user_access.ts';
import { passwordFromStdin, namedUser, required, requiredRole, shownUser, waitForPropagation, type Command } from './command.ts';
import { invitationsOver } from '../settings/invitations.ts';
import { plural } from '../shared/words.ts';

/** The admin CLI's `user` commands: people, their passwords, and deleting one with everything they were given. */

const NAMED = '(--email EMAIL | --user USER_ID)';

const create: Command = {
  name: 'user create',
  synopsis: `--email EMAIL --name NAME --workspace WORKSPACE_ID --role ${ROLES.join('|')} --password-stdin\n[--given-name NAME] [--family-name NAME]`,
  description: 'A user who belongs to the workspace with the role. The password (at least 8 characters, not a commonly\n'
    + 'used one nor the user\'s email or name) is read from standard input, never taken as an argument, and stored\n'
    + 'as an argon2id hash.',
  options: ['email', 'name', 'workspace', 'role', 'password-stdin', 'given-name', 'family-name'],
  async run({ accounts, options }) {
    const workspaceId = required(options, 'workspace');
    const role = requiredRole(options);
    const email = required(options, 'email');
    const name = required(options, 'name');
    const password = await passwordFromStdin(options);
    const { user, membership } = await accounts.createMember({
      email,
      name,
      password,
      ...(options['given-name'] ? { givenName: options['given-name'] } : {}),
      ...(options['family-name'] ? { familyName: options['family-name'] } : {}),
    }, workspaceId, role);
    return {
      text: `created user ${user.id} (${user.email}), ${membership.role} of ${workspaceId}`,
      json: { ...shownUser(user), workspace_id: workspaceId, role: membership.role },
    };
  },
};

const list: Command = {
  name: 'user list',
  synopsis: '[--workspace WORKSPACE_ID]',
  description: 'Every user, oldest first, with the workspaces they belong to and their role in each;\n'
    + 'with --workspace, only the members of that workspace.',
  options: ['workspace'],
  async run({ accounts, options }) {
    const users = (await accounts.listUsers(options.workspace)).map(shownUserWithMemberships);
    const lines = users.map((user) => `${user.id}\t${user.email}\t${user.name}\t${user.memberships.map((m) => `${m.workspace_id} (${m.role})`).join(', ') || '-'}`);
    return { text: lines.join('\n') || '(no users)', json: users };
  },
};

const setPassword: Command = {
  name: 'user set-password',
  synopsis: `${NAMED} --password-stdin`,
  description: 'Replaces the user\'s password with the one read from standard input (at least 8 characters, not a\n'
    + 'commonly used one nor the user\'s email or name), and signs them out of every browser. The applications they\n'
    + 'allowed keep their access.',
  options: ['email', 'user', 'password-stdin'],
  async run({ store, accounts, options, engine }) {
    const user = await namedUser(accounts, options);
    const password = await passwordFromStdin(options);
    // The engine first (it needs the keys): a start it refuses changes nothing.
    const access = new UserAccess({ store, ...await engine() });
    await accounts.setPassword(user.id, password);
    const sessions = await access.endSessions(user.id);
    return {
      text: `set the password of ${user.id} (${user.email}); signed out of ${plural(sessions, 'session')}`,
      json: { id: user.id, email: user.email, sessions_ended: sessions },
    };
  },
};

const remove: Command = {
  name: 'user delete',
  synopsis: NAMED,
  description: 'Deletes the user and their memberships, signs them out everywhere and revokes every application\n'
    + 'they allowed: their tokens are refused on every instance by the time the command returns. Their\n'
    + 'workspaces\' API keys and clients stay. Refused while they are the last admin of a workspace: make\n'
    + 'another member an admin first (member set-role), or delete the workspace (workspace delete).',
  options: ['email', 'user'],
  async run({ store, accounts, options, engine }) {
    const user = await namedUser(accounts, options);
    const workspaces = await accounts.workspacesOf(user.id);
    const memberships = workspaces.length;
    // The engine (it needs the keys), and the last-admin rule: a refusal of either leaves
    // everything as it was. Then the grants and sessions before the account, so a deletion cut
    // short leaves none behind it can no longer be found by; and once more after it.
    const access = new UserAccess({ store, ...await engine() });
    await accounts.refuseRemovingLastAdmin(user.id, workspaces.map(({ id }) => id));
    let grants = await access.revokeGrants(user.id);
    let sessions = await access.endSessions(user.id);
    await accounts.deleteUser(user.id);
    grants += await access.revokeGrants(user.id);
    sessions += await access.endSessions(user.id);
    // The invitation links they made as an admin (read before the deletion) are deleted too.
    const invitations = invitationsOver(store, accounts);
    for (const { id, role } of workspaces) if (role === 'admin') await invitations.voidInvitationsBy(id, user.id);
    await waitForPropagation();
    return {
      text: `deleted user ${user.id} (${user.email}): ${plural(memberships, 'membership')}, ${plural(sessions, 'session')} ended, ${plural(grants, 'grant')} revoked; their tokens are refused from now`,
      json: { deleted: user.id, email: user.email, memberships_ended: memberships, sessions_ended: sessions, grants_revoked: grants },
    };
  },
};

export const USER_COMMANDS: readonly Command[] = [create, list, setPassword, remove];

function shownUserWithMemberships({ user, memberships }: UserWithMemberships) {
  return {
    ...shownUser(user),
    memberships: memberships.map((workspace) => ({ workspace_id: workspace.id, workspace_name: workspace.name, role: workspace.role })),
  };
}
