import { type RedisConnection, Script } from './connection.ts';
import type { RedisKeys } from './keys.ts';
import { DuplicateError, LastAdminError, type AccountStore, type Membership, type Role, type User, type Workspace } from '../store.ts';

/** KEYS: workspace, workspaces (sorted by createdAt, then id). ARGV: JSON, createdAt, id. Returns 0 when the id is taken. */
const createWorkspace = new Script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
`);

/**
 * Claims the email (SET NX) and writes the user in one step, so two sign-ups with one email
 * cannot both succeed. KEYS: user, email, users. ARGV: JSON, id.
 * Returns 1, 0 (email taken) or -1 (id taken).
 */
const createUser = new Script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if not redis.call('SET', KEYS[2], ARGV[2], 'NX') then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
return 1
`);

/**
 * Whether the workspace keeps an admin other than the user: HAS_OTHER_ADMIN(members key, user id).
 * The membership scripts below start with it, so the last-admin rule is checked in the same
 * atomic step as the change it allows.
 */
const HAS_OTHER_ADMIN = `
local function hasOtherAdmin(members, userId)
  local roles = redis.call('HGETALL', members)
  for i = 1, #roles, 2 do
    if roles[i] ~= userId and roles[i + 1] == 'admin' then return true end
  end
  return false
end
`;

/**
 * KEYS: the user's memberships, workspace, user, the workspace's members. ARGV: workspace id, role, user id.
 * Returns 1, 0 when the user or workspace does not exist, -1 when it would demote the workspace's last admin.
 */
const putMembership = new Script(`${HAS_OTHER_ADMIN}
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
if ARGV[2] ~= 'admin' and redis.call('HGET', KEYS[1], ARGV[1]) == 'admin' and not hasOtherAdmin(KEYS[4], ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[2])
return 1
`);

/**
 * KEYS: the user's memberships, the workspace's members. ARGV: workspace id, user id.
 * Returns 1, 0 when the user is not a member, -1 when they are the workspace's last admin.
 */
const removeMembership = new Script(`${HAS_OTHER_ADMIN}
local role = redis.call('HGET', KEYS[1], ARGV[1])
if not role then return 0 end
if role == 'admin' and not hasOtherAdmin(KEYS[2], ARGV[2]) then return -1 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[2])
return 1
`);

/**
 * Deletes a user, their email claim and their memberships, given the workspaces the caller read
 * they belong to. KEYS: user, email, users, the user's memberships, then each of those workspaces'
 * members. ARGV: user id, then those workspace ids. Returns {1}, {0} when there is no such user,
 * {-1, workspace id} when they are its last admin, {-2} when their memberships changed since the
 * caller read them (read again and retry).
 */
const deleteUser = new Script(`${HAS_OTHER_ADMIN}
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
if redis.call('HLEN', KEYS[4]) ~= #ARGV - 1 then return {-2} end
for i = 2, #ARGV do
  local role = redis.call('HGET', KEYS[4], ARGV[i])
  if not role then return {-2} end
  if role == 'admin' and not hasOtherAdmin(KEYS[3 + i], ARGV[1]) then return {-1, ARGV[i]} end
end
for i = 2, #ARGV do redis.call('HDEL', KEYS[3 + i], ARGV[1]) end
redis.call('DEL', KEYS[4], KEYS[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
redis.call('SREM', KEYS[3], ARGV[1])
return {1}
`);

/**
 * Deletes a workspace and its memberships, given the members the caller read. KEYS: workspace,
 * workspaces, its members, then each of those users' memberships. ARGV: workspace id, then those
 * user ids. Returns 1, 0 when there is no such workspace, -2 when its members changed since the
 * caller read them (read again and retry).
 */
const deleteWorkspace = new Script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HLEN', KEYS[3]) ~= #ARGV - 1 then return -2 end
for i = 2, #ARGV do
  if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 then return -2 end
end
for i = 2, #ARGV do redis.call('HDEL', KEYS[2 + i], ARGV[1]) end
redis.call('DEL', KEYS[3], KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`);

/** Replaces a JSON value only if it still is what the caller read. KEYS: the key. ARGV: as read, replacement. Returns 1 or 0. */
const replaceIfUnchanged = new Script(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`);

/**
 * Copies a user's memberships of the given workspaces into those workspaces' members, as they are
 * now (one stored before the members were kept by workspace). KEYS: the user's memberships, then
 * each workspace's members. ARGV: user id, then the workspace ids.
 */
const indexMemberships = new Script(`
for i = 2, #ARGV do
  local role = redis.call('HGET', KEYS[1], ARGV[i])
  if role then redis.call('HSET', KEYS[i], ARGV[1], role) end
end
return 1
`);

/** A step that found the memberships changed since they were read is tried again, this many times in all. */
const ATTEMPTS = 10;

/** KEYS: the user's memberships, workspaces. Returns {workspace id, role, createdAt}... for workspaces that exist. */
const listMemberships = new Script(`
local memberships = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #memberships, 2 do
  local createdAt = redis.call('ZSCORE', KEYS[2], memberships[i])
  if createdAt then
    out[#out + 1] = memberships[i]
    out[#out + 1] = memberships[i + 1]
    out[#out + 1] = createdAt
  end
end
return out
`);

/** Workspaces, users and memberships, all under the `{accounts}` hash tag (keys.ts). Kept without a TTL. */
export class RedisAccountStore implements AccountStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;
  /** Settles once the members by workspace are known to be complete (#membersIndexed). */
  #indexed: Promise<void> | undefined;

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  /**
   * The members of each workspace (keys.ts members) are written with every membership since they
   * were kept; those stored before are copied there once, by the first store to need them, before
   * anything reads or changes them. Copying again is harmless, so stores starting together may
   * both do it.
   */
  #membersIndexed(): Promise<void> {
    this.#indexed ??= this.#redis.run(async (client) => {
      if (await client.exists(this.#keys.membersIndexed())) return;
      for (const userId of await client.smembers(this.#keys.users())) {
        const workspaceIds = await client.hkeys(this.#keys.memberships(userId));
        if (!workspaceIds.length) continue;
        await indexMemberships.run(client, [this.#keys.memberships(userId), ...workspaceIds.map((id) => this.#keys.members(id))], [userId, ...workspaceIds]);
      }
      await client.set(this.#keys.membersIndexed(), '1');
    }).catch((error: unknown) => {
      this.#indexed = undefined;
      throw error;
    });
    return this.#indexed;
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

  async listUsers() {
    const users = await this.#redis.run(async (client) => {
      const ids = await client.smembers(this.#keys.users());
      if (!ids.length) return [];
      const stored = await client.mget(ids.map((id) => this.#keys.user(id)));
      return stored.flatMap((json) => json ? [JSON.parse(json) as User] : []);
    });
    // Ordered as SQLite orders them: by createdAt, then id.
    return users.sort((a, b) => a.createdAt - b.createdAt || compare(a.id, b.id));
  }

  async setPasswordHash(userId: string, passwordHash: string) {
    const key = this.#keys.user(userId);
    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      const replaced = await this.#redis.run(async (client) => {
        const json = await client.get(key);
        if (json === null) return undefined;
        const user = { ...JSON.parse(json) as User, passwordHash };
        return await replaceIfUnchanged.run(client, [key], [json, JSON.stringify(user)]) === 1;
      });
      if (replaced !== false) return replaced === true;
    }
    throw new Error(`user ${userId} kept changing while its password was set`);
  }

  async deleteUser(userId: string) {
    await this.#membersIndexed();
    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      const [result, workspaceId] = await this.#redis.run(async (client) => {
        const user = parse<User>(await client.get(this.#keys.user(userId)));
        if (!user) return [0];
        const workspaceIds = await client.hkeys(this.#keys.memberships(userId));
        return await deleteUser.run(client,
          [this.#keys.user(userId), this.#keys.email(user.email), this.#keys.users(), this.#keys.memberships(userId), ...workspaceIds.map((id) => this.#keys.members(id))],
          [userId, ...workspaceIds]) as [number, string?];
      });
      if (result === -1) throw new LastAdminError(workspaceId!);
      if (result !== -2) return result === 1;
    }
    throw new Error(`the memberships of user ${userId} kept changing while it was deleted`);
  }

  async deleteWorkspace(id: string) {
    await this.#membersIndexed();
    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      const result = await this.#redis.run(async (client) => {
        const userIds = await client.hkeys(this.#keys.members(id));
        return deleteWorkspace.run(client,
          [this.#keys.workspace(id), this.#keys.workspaces(), this.#keys.members(id), ...userIds.map((userId) => this.#keys.memberships(userId))],
          [id, ...userIds]);
      });
      if (result !== -2) return result === 1;
    }
    throw new Error(`the members of workspace ${id} kept changing while it was deleted`);
  }

  async putMembership(membership: Membership) {
    await this.#membersIndexed();
    const stored = await this.#redis.run((client) => putMembership.run(client,
      [this.#keys.memberships(membership.userId), this.#keys.workspace(membership.workspaceId), this.#keys.user(membership.userId), this.#keys.members(membership.workspaceId)],
      [membership.workspaceId, membership.role, membership.userId]));
    if (stored === 0) throw new Error(`cannot add user ${membership.userId} to workspace ${membership.workspaceId}: one of them does not exist`);
    if (stored === -1) throw new LastAdminError(membership.workspaceId);
  }

  async removeMembership(userId: string, workspaceId: string) {
    await this.#membersIndexed();
    const removed = await this.#redis.run((client) => removeMembership.run(client,
      [this.#keys.memberships(userId), this.#keys.members(workspaceId)], [workspaceId, userId]));
    if (removed === -1) throw new LastAdminError(workspaceId);
    return removed === 1;
  }

  async listMembers(workspaceId: string) {
    await this.#membersIndexed();
    const roles = await this.#redis.run((client) => client.hgetall(this.#keys.members(workspaceId)));
    return Object.entries(roles).map(([userId, role]) => ({ userId, workspaceId, role: role as Role }));
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
      rows.sort((a, b) => a.createdAt - b.createdAt || compare(a.workspaceId, b.workspaceId));
      return rows.map(({ workspaceId, role }) => ({ userId, workspaceId, role }));
    });
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function parse<T>(json: string | null): T | undefined {
  return json === null ? undefined : JSON.parse(json) as T;
}
