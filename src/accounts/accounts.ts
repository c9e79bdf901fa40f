import { DuplicateError, LastAdminError, normalEmail, ROLES, type AccountStore, type Membership, type Role, type User, type Workspace } from '../../adapters/store.ts';
import { newId } from './ids.ts';
import { emailProblem, namePartProblem, nameProblem } from './names.ts';
import { decoyHash, hashPassword, passwordProblem, verifyPassword, type PasswordContext } from './passwords.ts';
import { nowSeconds } from '../shared/clock.ts';
import { digest } from '../shared/digest.ts';

/** Bad input to an account operation; the message is safe to show to the person who gave it. */
export class AccountError extends Error {
  override name = 'AccountError';
}

/** A new password refused by the password rules (passwordProblem); the message is worded as the caller asked (`told`, `form`). */
export class UnusablePassword extends AccountError {
  override name = 'UnusablePassword';
}

/** A change refused because it would leave a workspace without an admin (the store checks it in the same step). */
export class LastAdminRefusal extends AccountError {
  override name = 'LastAdminRefusal';
  readonly user: User;

  constructor(message: string, user: User) {
    super(message);
    this.user = user;
  }
}

/** A workspace as one of its members sees it: with the member's role there. */
export type WorkspaceMembership = Workspace & { role: Role };

/** A user with the workspaces they belong to, as an operator lists them. */
export interface UserWithMemberships {
  user: User;
  memberships: WorkspaceMembership[];
}

/** One member of a workspace. */
export interface Member {
  user: User;
  role: Role;
}

export interface NewUser {
  email: string;
  name: string;
  password: string;
  givenName?: string;
  familyName?: string;
}

/** Workspaces, users and memberships: the identity model behind logins and tokens. */
export class Accounts {
  readonly #store: AccountStore;
  readonly #serviceName: string | undefined;

  /** `serviceName`: SERVICE_NAME, which a new password may not be. */
  constructor(store: AccountStore, { serviceName }: { serviceName?: string } = {}) {
    this.#store = store;
    this.#serviceName = serviceName;
  }

  async createWorkspace(name: string): Promise<Workspace> {
    const problem = nameProblem('a workspace', name);
    if (problem) throw new AccountError(problem);
    const trimmed = name.trim();
    const workspace = { id: newId('ws'), name: trimmed, createdAt: nowSeconds() };
    await this.#store.createWorkspace(workspace);
    return workspace;
  }

  getWorkspace(id: string) {
    return this.#store.getWorkspace(id);
  }

  listWorkspaces() {
    return this.#store.listWorkspaces();
  }

  /** Creates a user who belongs to a workspace; checks everything first, so a refusal writes nothing. */
  async createMember(input: NewUser, workspaceId: string, role: string): Promise<{ user: User; membership: Membership }> {
    if (!isRole(role)) throw new AccountError(`role must be one of ${ROLES.join(', ')}, got "${role}"`);
    const workspace = await this.#existingWorkspace(workspaceId);
    const user = await this.createUser(input, workspace.name);
    return { user, membership: await this.addMember(user.id, workspaceId, role) };
  }

  /**
   * Deletes the workspace and every membership of it: its people stay, with their other
   * workspaces. What else belongs to it (clients, API keys, grants, records) is not the accounts'
   * to delete: src/cli/workspace_commands.ts deletes it.
   */
  async deleteWorkspace(workspaceId: string): Promise<Workspace> {
    const workspace = await this.#existingWorkspace(workspaceId);
    if (!await this.#store.deleteWorkspace(workspaceId)) throw new AccountError(`no workspace with id ${workspaceId}`);
    return workspace;
  }

  /** Creates a user; `workspaceName`, that of the workspace they are made for, is one more word their password may not be. */
  async createUser(input: NewUser, workspaceName?: string): Promise<User> {
    const email = normalEmail(input.email);
    const problem = emailProblem(email)
      ?? nameProblem('a user', input.name)
      ?? (input.givenName === undefined ? undefined : namePartProblem('a given name', input.givenName))
      ?? (input.familyName === undefined ? undefined : namePartProblem('a family name', input.familyName));
    if (problem) throw new AccountError(problem);
    this.#checkPassword(input.password, { ...input, email }, { workspaceNames: workspaceName === undefined ? [] : [workspaceName] });
    // The store refuses the same address in the same form; one stored decomposed before emails were
    // normalised is found here.
    if (await this.#findByEmail(email)) throw new AccountError(`a user with email ${email} already exists`);
    const user: User = {
      id: newId('usr'),
      email,
      name: input.name.trim(),
      ...(input.givenName ? { givenName: input.givenName } : {}),
      ...(input.familyName ? { familyName: input.familyName } : {}),
      passwordHash: await hashPassword(input.password),
      createdAt: nowSeconds(),
    };
    try {
      await this.#store.createUser(user);
    } catch (error) {
      if (error instanceof DuplicateError) throw new AccountError(error.message);
      throw error;
    }
    return user;
  }

  getUser(id: string) {
    return this.#store.getUser(id);
  }

  /** The user with this email (compared case-insensitively, however its accents were typed), if any. */
  findUserByEmail(email: string) {
    return this.#findByEmail(email);
  }

  /**
   * Looks the address up as users are stored since emails are normalised, then as a user created
   * before may have been stored: decomposed, or with its domain in punycode as it was typed.
   */
  async #findByEmail(email: string): Promise<User | undefined> {
    const normal = normalEmail(email);
    for (const stored of new Set([normal, normal.normalize('NFD'), email.trim().normalize('NFC')])) {
      const user = await this.#store.findUserByEmail(stored);
      if (user) return user;
    }
    return undefined;
  }

  countUsers() {
    return this.#store.countUsers();
  }

  /** Every user, oldest first, with their workspaces; with `workspaceId`, only that workspace's members. */
  async listUsers(workspaceId?: string): Promise<UserWithMemberships[]> {
    let users: User[];
    if (workspaceId === undefined) {
      users = await this.#store.listUsers();
    } else {
      await this.#existingWorkspace(workspaceId);
      users = (await this.listMembers(workspaceId)).map(({ user }) => user);
    }
    return Promise.all(users.map(async (user) => ({ user, memberships: await this.workspacesOf(user.id) })));
  }

  /**
   * Replaces the user's password, checked as createUser checks one: nor may it be the name of a
   * workspace they belong to. Refused with UnusablePassword, worded for whoever `said` names (an
   * operator by default): a caller that checked the password before may still see it refused
   * here, as the user may have joined a workspace meanwhile.
   */
  async setPassword(userId: string, password: string, said: Pick<PasswordCheck, 'told' | 'form'> = {}): Promise<void> {
    const user = await this.#existingUser(userId);
    this.#checkPassword(password, user, { workspaceNames: await this.workspaceNamesOf(userId), ...said });
    const passwordHash = await hashPassword(password);
    if (!await this.#store.setPasswordHash(userId, passwordHash)) throw new AccountError(`no user with id ${userId}`);
  }

  /**
   * Deletes the user and their memberships; refused while they are the last admin of a workspace.
   * Their sessions and grants are the engine's: src/engine/user_access.ts ends them.
   */
  async deleteUser(userId: string): Promise<User> {
    const user = await this.#existingUser(userId);
    if (!await this.#keepingAnAdmin(user, () => this.#store.deleteUser(userId))) throw new AccountError(`no user with id ${userId}`);
    return user;
  }

  /** Makes the user a member of the workspace with `role`, or changes their role there if they are one. */
  async addMember(userId: string, workspaceId: string, role: string): Promise<Membership> {
    if (!isRole(role)) throw new AccountError(`role must be one of ${ROLES.join(', ')}, got "${role}"`);
    await this.#existingWorkspace(workspaceId);
    const user = await this.#existingUser(userId);
    const membership = { userId, workspaceId, role };
    await this.#keepingAnAdmin(user, () => this.#store.putMembership(membership));
    return membership;
  }

  /** Changes the role of a member of the workspace; refused when it would demote its last admin. */
  async setRole(userId: string, workspaceId: string, role: string): Promise<Membership> {
    if (!isRole(role)) throw new AccountError(`role must be one of ${ROLES.join(', ')}, got "${role}"`);
    const { user } = await this.#existingMembership(userId, workspaceId);
    const membership = { userId, workspaceId, role };
    await this.#keepingAnAdmin(user, () => this.#store.putMembership(membership));
    return membership;
  }

  /** Ends the user's membership of the workspace; refused when they are its last admin. */
  async removeMember(userId: string, workspaceId: string): Promise<Membership> {
    const { user, membership } = await this.#existingMembership(userId, workspaceId);
    if (!await this.#keepingAnAdmin(user, () => this.#store.removeMembership(userId, workspaceId))) {
      throw new AccountError(`${user.email} is not a member of workspace ${workspaceId}`);
    }
    return membership;
  }

  /** The workspace's members, oldest user first. */
  async listMembers(workspaceId: string): Promise<Member[]> {
    const memberships = await this.#store.listMembers(workspaceId);
    const members = await Promise.all(memberships.map(async ({ userId, role }) => {
      const user = await this.#store.getUser(userId);
      return user && { user, role };
    }));
    return members.filter((member) => member !== undefined)
      .sort((a, b) => a.user.createdAt - b.user.createdAt || (a.user.id < b.user.id ? -1 : a.user.id > b.user.id ? 1 : 0));
  }

  /** The workspaces a user belongs to, with their role in each. */
  async workspacesOf(userId: string): Promise<WorkspaceMembership[]> {
    const memberships = await this.#store.listMemberships(userId);
    const workspaces = await Promise.all(memberships.map(async ({ workspaceId, role }) => {
      const workspace = await this.#store.getWorkspace(workspaceId);
      return workspace && { ...workspace, role };
    }));
    return workspaces.filter((workspace) => workspace !== undefined);
  }

  /** The names of the workspaces the user belongs to, which their new password may not be. */
  async workspaceNamesOf(userId: string): Promise<string[]> {
    return (await this.workspacesOf(userId)).map(({ name }) => name);
  }

  /** The workspace, with the user's role in it, if the user is a member. */
  async membershipIn(userId: string, workspaceId: string): Promise<(Workspace & { role: Role }) | undefined> {
    const membership = await this.#store.getMembership(userId, workspaceId);
    const workspace = membership && await this.#store.getWorkspace(workspaceId);
    return workspace && membership && { ...workspace, role: membership.role };
  }

  /** The user's role in the workspace, if a member: what each token issuance needs, in one lookup. */
  async roleIn(userId: string, workspaceId: string): Promise<Role | undefined> {
    return (await this.#store.getMembership(userId, workspaceId))?.role;
  }

  /**
   * What a known-device cookie's entries of this email are bound to (src/rate_limits/known_devices.ts):
   * a digest of its user's id and password hash, which no cookie holds, so that a new password, or
   * another user given the email, ends every entry made before. Undefined when no user has the email.
   */
  async credentialStamp(email: string): Promise<string | undefined> {
    const user = await this.#findByEmail(email);
    return user && digest(`${user.id}\n${user.passwordHash}`);
  }

  /**
   * The user whose email and password these are, if any, and the id of the user the email names
   * (for the sign-in log only: a refusal must read the same either way). Takes the same time
   * whether or not the email exists.
   */
  async authenticate(email: string, password: string): Promise<{ user?: User; accountId?: string }> {
    const named = await this.#findByEmail(email);
    const valid = await verifyPassword(password, named?.passwordHash ?? await decoyHash());
    if (!named) return {};
    return valid ? { user: named, accountId: named.id } : { accountId: named.id };
  }

  /**
   * Refuses, in removeMember's and deleteUser's words, while the user is the last admin of one of
   * `workspaceIds`: for a caller that revokes what the user allowed before it removes them, so
   * that a removal cut short leaves no grant to come back, and a refused one revokes nothing. The
   * removal itself still refuses, atomically, should another admin go meanwhile.
   */
  async refuseRemovingLastAdmin(userId: string, workspaceIds: readonly string[]): Promise<void> {
    const user = await this.#existingUser(userId);
    for (const workspaceId of workspaceIds) {
      const admins = (await this.#store.listMembers(workspaceId)).filter(({ role }) => role === 'admin');
      if (admins.length === 1 && admins[0]!.userId === userId) throw await this.#lastAdmin(user, workspaceId);
    }
  }

  /** Runs a store change, refused in words when it would leave a workspace without an admin. */
  async #keepingAnAdmin<T>(user: User, change: () => Promise<T>): Promise<T> {
    try {
      return await change();
    } catch (error) {
      if (!(error instanceof LastAdminError)) throw error;
      throw await this.#lastAdmin(user, error.workspaceId);
    }
  }

  async #lastAdmin(user: User, workspaceId: string): Promise<LastAdminRefusal> {
    const workspace = await this.#store.getWorkspace(workspaceId);
    const named = workspace ? `${workspace.id} ("${workspace.name}")` : workspaceId;
    return new LastAdminRefusal(`${user.email} is the last admin of workspace ${named}: make another member an admin first, or delete the workspace`, user);
  }

  /**
   * Why `password` will not do as the new password of this user (passwordProblem, told who they are:
   * their email and names, this service's name and the workspaces they belong to or are made a
   * member of, `workspaceNames`); undefined when it will. `told`: to whom the refusal is said, an
   * operator (the default) or the user themselves; `form`, `creatingWorkspace`: as passwordProblem's.
   */
  newPasswordProblem(password: string, user: PasswordOwner, { workspaceNames = [], ...said }: PasswordCheck = {}): string | undefined {
    return passwordProblem(password, {
      email: user.email,
      names: [user.name, user.givenName, user.familyName],
      serviceNames: [this.#serviceName],
      workspaceNames,
      ...said,
    });
  }

  #checkPassword(password: string, user: PasswordOwner, check: PasswordCheck): void {
    const problem = this.newPasswordProblem(password, user, check);
    if (problem) throw new UnusablePassword(problem);
  }

  async #existingWorkspace(workspaceId: string): Promise<Workspace> {
    const workspace = await this.#store.getWorkspace(workspaceId);
    if (!workspace) throw new AccountError(`no workspace with id ${workspaceId}`);
    return workspace;
  }

  async #existingUser(userId: string): Promise<User> {
    const user = await this.#store.getUser(userId);
    if (!user) throw new AccountError(`no user with id ${userId}`);
    return user;
  }

  async #existingMembership(userId: string, workspaceId: string): Promise<{ user: User; membership: Membership }> {
    await this.#existingWorkspace(workspaceId);
    const user = await this.#existingUser(userId);
    const membership = await this.#store.getMembership(userId, workspaceId);
    if (!membership) throw new AccountError(`${user.email} is not a member of workspace ${workspaceId}`);
    return { user, membership };
  }
}

type PasswordOwner = Pick<User, 'email' | 'name' | 'givenName' | 'familyName'>;

/** What else a new password is checked against, and who is told why it will not do. */
export type PasswordCheck = Pick<PasswordContext, 'workspaceNames' | 'creatingWorkspace' | 'told' | 'form'>;

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
