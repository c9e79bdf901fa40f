import { DuplicateError, ROLES, type AccountStore, type Membership, type Role, type User, type Workspace } from '../../adapters/store.ts';
import { newId } from './ids.ts';
import { decoyHash, hashPassword, verifyPassword } from './passwords.ts';
import { nowSeconds } from '../shared/clock.ts';

/** Bad input to an account operation; the message is safe to show to the person who gave it. */
export class AccountError extends Error {
  override name = 'AccountError';
}

/** A workspace as one of its members sees it: with the member's role there. */
export type WorkspaceMembership = Workspace & { role: Role };

export interface NewUser {
  email: string;
  name: string;
  password: string;
  givenName?: string;
  familyName?: string;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const MIN_PASSWORD_LENGTH = 8;

/** Workspaces, users and memberships: the identity model behind logins and tokens. */
export class Accounts {
  readonly #store: AccountStore;

  constructor(store: AccountStore) {
    this.#store = store;
  }

  async createWorkspace(name: string): Promise<Workspace> {
    const trimmed = name.trim();
    if (!trimmed) throw new AccountError('a workspace needs a name');
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
    if (!await this.#store.getWorkspace(workspaceId)) throw new AccountError(`no workspace with id ${workspaceId}`);
    const user = await this.createUser(input);
    return { user, membership: await this.addMember(user.id, workspaceId, role) };
  }

  async createUser(input: NewUser): Promise<User> {
    const email = input.email.trim();
    if (!EMAIL.test(email)) throw new AccountError(`"${input.email}" is not an email address`);
    if (!input.name.trim()) throw new AccountError('a user needs a name');
    if (input.password.length < MIN_PASSWORD_LENGTH) {
      throw new AccountError(`a password needs at least ${MIN_PASSWORD_LENGTH} characters`);
    }
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

  countUsers() {
    return this.#store.countUsers();
  }

  async addMember(userId: string, workspaceId: string, role: string): Promise<Membership> {
    if (!isRole(role)) throw new AccountError(`role must be one of ${ROLES.join(', ')}, got "${role}"`);
    if (!await this.#store.getWorkspace(workspaceId)) throw new AccountError(`no workspace with id ${workspaceId}`);
    if (!await this.#store.getUser(userId)) throw new AccountError(`no user with id ${userId}`);
    const membership = { userId, workspaceId, role };
    await this.#store.putMembership(membership);
    return membership;
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

  /** The user whose email and password these are, or undefined. Takes the same time whether or not the email exists. */
  async authenticate(email: string, password: string): Promise<User | undefined> {
    const user = await this.#store.findUserByEmail(email.trim());
    const valid = await verifyPassword(password, user?.passwordHash ?? await decoyHash());
    return user && valid ? user : undefined;
  }
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
