import { ROLES, type Role } from '../../adapters/store.ts';
import { AccountError, LastAdminRefusal, isRole, type Accounts, type Member } from '../accounts/accounts.ts';
import type { UserAccess } from '../engine/user_access.ts';

/** What each role may do, as the members page and its confirmations say it ("they can…", "you can…"). */
export const ROLE_DESCRIPTIONS: Readonly<Record<Role, string>> = {
  admin: 'can manage the workspace (its members, API keys and applications) and change its data',
  member: 'can read and change the workspace’s data, through applications',
  viewer: 'can read the workspace’s data, through applications, but change nothing',
};

/** Why a change was not made, in words for the admin who asked; `status` is the page's. */
export interface MemberRefusal {
  status: 400 | 404 | 409;
  error: string;
  /** For a refusal to take away a workspace's last admin: that admin's user id (the page speaks to them when they asked it). */
  lastAdmin?: string;
}

export type MemberChange<T> = { done: T } | { refused: MemberRefusal };

/**
 * What a workspace admin does with its members in the settings area: roles and removal, through
 * the Accounts methods the admin CLI uses, so the store keeps the last admin in the same step as
 * the change. A removed member's grants for the workspace are revoked (UserAccess), so the
 * applications they allowed lose it too.
 */
export class WorkspaceMembers {
  readonly #accounts: Accounts;
  readonly #userAccess: UserAccess;

  constructor({ accounts, userAccess }: { accounts: Accounts; userAccess: UserAccess }) {
    this.#accounts = accounts;
    this.#userAccess = userAccess;
  }

  list(workspaceId: string): Promise<Member[]> {
    return this.#accounts.listMembers(workspaceId);
  }

  /**
   * The member about to be changed, and whether the change may be made: undefined for someone not
   * in the workspace (another workspace's user is never found through this one).
   */
  async check(workspaceId: string, userId: string, change: { role: Role } | 'remove'): Promise<MemberChange<Member>> {
    const members = await this.list(workspaceId);
    const member = members.find(({ user }) => user.id === userId);
    if (!member) return { refused: noSuchMember() };
    const losesAdmin = member.role === 'admin' && (change === 'remove' || change.role !== 'admin');
    if (losesAdmin && members.filter(({ role }) => role === 'admin').length === 1) return { refused: lastAdmin(member, change) };
    return { done: member };
  }

  /** Gives the member `role`; refused for a role that is not one, someone not in the workspace, or its last admin. */
  async setRole(workspaceId: string, userId: string, chosen: unknown): Promise<MemberChange<Member>> {
    const role = roleOf(chosen);
    if (!role) return { refused: noSuchRole() };
    const checked = await this.check(workspaceId, userId, { role });
    if ('refused' in checked) return checked;
    // Another admin may have changed the members since: the store decides, and says so in words.
    const refused = await refusedByAccounts(() => this.#accounts.setRole(userId, workspaceId, role), { role });
    return refused ? { refused } : { done: { user: checked.done.user, role } };
  }

  /** Ends the membership and revokes the member's grants for the workspace. */
  async remove(workspaceId: string, userId: string): Promise<MemberChange<Member>> {
    const checked = await this.check(workspaceId, userId, 'remove');
    if ('refused' in checked) return checked;
    // The grants first (the check above refused a last admin), so a removal cut short leaves none to
    // come back should the member be added again; and once more after it, for one allowed meanwhile.
    await this.#userAccess.revokeGrants(userId, { workspaceId });
    const refused = await refusedByAccounts(() => this.#accounts.removeMember(userId, workspaceId), 'remove');
    if (refused) return { refused };
    await this.#userAccess.revokeGrants(userId, { workspaceId });
    return checked;
  }
}

async function refusedByAccounts(change: () => Promise<unknown>, asked: { role: Role } | 'remove'): Promise<MemberRefusal | undefined> {
  try {
    await change();
    return undefined;
  } catch (error) {
    // Another admin changed the members meanwhile: said as the page's own check says it (the CLI's words name what only it can do).
    if (error instanceof LastAdminRefusal) return lastAdmin({ user: error.user, role: 'admin' }, asked);
    if (error instanceof AccountError) return { status: 409, error: `Nothing was changed: ${error.message}.` };
    throw error;
  }
}

/** A role as a form names it, or undefined for anything else. */
export function roleOf(value: unknown): Role | undefined {
  return typeof value === 'string' && isRole(value) ? value : undefined;
}

export function noSuchRole(): MemberRefusal {
  return { status: 400, error: `There is no such role: choose one of ${ROLES.join(', ')}.` };
}

function noSuchMember(): MemberRefusal {
  return { status: 404, error: 'This workspace has no such member: they may have been removed already.' };
}

function lastAdmin({ user }: Member, change: { role: Role } | 'remove'): MemberRefusal {
  const what = change === 'remove' ? 'removed' : `made ${article(change.role)} ${change.role}`;
  return { status: 409, error: `${user.name} is this workspace’s only admin, so they cannot be ${what}: a workspace always keeps an admin. Make another member an admin first.`, lastAdmin: user.id };
}

/** The refusal above, said to the last admin who asked to step down or leave. */
export function lastAdminYourself(workspaceName: string): string {
  return `You are the last admin of ${workspaceName}: make another member an admin first.`;
}

export function article(role: Role): string {
  return role === 'admin' ? 'an' : 'a';
}
