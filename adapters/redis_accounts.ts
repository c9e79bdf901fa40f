import type { RedisConnection } from './redis_connection.ts';
import type { RedisKeys } from './redis_keys.ts';
import { createUser, createWorkspace, listMemberships, putMembership } from './redis_scripts.ts';
import { DuplicateError, type AccountStore, type Membership, type Role, type User, type Workspace } from './store.ts';

/** Workspaces, users and memberships, all under the `{accounts}` hash tag (redis_keys.ts). Kept without a TTL. */
export class RedisAccountStore implements AccountStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async createWorkspace(workspace: Workspace) {
    const stored: Workspace = { id: workspace.id, name: workspace.name, createdAt: workspace.createdAt };
    const created = await this.#redis.run((client) => createWorkspace.run(client,
      [this.#keys.workspace(workspace.id), this.#keys.workspaces()],
      [JSON.stringify(stored), workspace.createdAt, workspace.id]));
    if (created === 0) throw new DuplicateError(`a workspace with id ${workspace.id} already exists`);
  }

  getWorkspace(id: string) {
    return this.#redis.run(async (client) => parse<Workspace>(await client.get(this.#keys.workspace(id))));
  }

  listWorkspaces() {
    return this.#redis.run(async (client) => {
      const ids = await client.zrange(this.#keys.workspaces(), 0, '-1');
      if (!ids.length) return [];
      const stored = await client.mget(ids.map((id) => this.#keys.workspace(id)));
      return stored.flatMap((json) => json ? [JSON.parse(json) as Workspace] : []);
    });
  }

  async createUser(user: User) {
    const stored: User = {
      id: user.id,
      email: user.email,
      name: user.name,
      // Empty names are left out, as the SQLite store reads them back.
      ...(user.givenName ? { givenName: user.givenName } : {}),
      ...(user.familyName ? { familyName: user.familyName } : {}),
      passwordHash: user.passwordHash,
      createdAt: user.createdAt,
    };
    const created = await this.#redis.run((client) => createUser.run(client,
      [this.#keys.user(user.id), this.#keys.email(user.email), this.#keys.users()],
      [JSON.stringify(stored), user.id]));
    if (created === 0) throw new DuplicateError(`a user with email ${user.email} already exists`);
    if (created === -1) throw new DuplicateError(`a user with id ${user.id} already exists`);
  }

  getUser(id: string) {
    return this.#redis.run(async (client) => parse<User>(await client.get(this.#keys.user(id))));
  }

  findUserByEmail(email: string) {
    return this.#redis.run(async (client) => {
      const id = await client.get(this.#keys.email(email));
      return id === null ? undefined : parse<User>(await client.get(this.#keys.user(id)));
    });
  }

  countUsers() {
    return this.#redis.run((client) => client.scard(this.#keys.users()));
  }

  async putMembership(membership: Membership) {
    const stored = await this.#redis.run((client) => putMembership.run(client,
      [this.#keys.memberships(membership.userId), this.#keys.workspace(membership.workspaceId), this.#keys.user(membership.userId)],
      [membership.workspaceId, membership.role]));
    if (stored === 0) throw new Error(`cannot add user ${membership.userId} to workspace ${membership.workspaceId}: one of them does not exist`);
  }

  getMembership(userId: string, workspaceId: string) {
    return this.#redis.run(async (client) => {
      const role = await client.hget(this.#keys.memberships(userId), workspaceId);
      return role === null ? undefined : { userId, workspaceId, role: role as Role };
    });
  }

  listMemberships(userId: string) {
    return this.#redis.run(async (client) => {
      const flat = await listMemberships.run(client, [this.#keys.memberships(userId), this.#keys.workspaces()], []) as string[];
      const rows: Array<{ workspaceId: string; role: Role; createdAt: number }> = [];
      for (let i = 0; i < flat.length; i += 3) rows.push({ workspaceId: flat[i]!, role: flat[i + 1] as Role, createdAt: Number(flat[i + 2]) });
      // Ordered as listWorkspaces orders them: by createdAt, then id.
      rows.sort((a, b) => a.createdAt - b.createdAt || (a.workspaceId < b.workspaceId ? -1 : a.workspaceId > b.workspaceId ? 1 : 0));
      return rows.map(({ workspaceId, role }) => ({ userId, workspaceId, role }));
    });
  }
}

function parse<T>(json: string | null): T | undefined {
  return json === null ? undefined : JSON.parse(json) as T;
}
