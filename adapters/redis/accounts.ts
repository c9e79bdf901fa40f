import { type RedisConnection, Script } from './connection.ts';
import type { RedisKeys } from './keys.ts';
import { DuplicateError, type AccountStore, type Membership, type Role, type User, type Workspace } from '../store.ts';

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

/** KEYS: the user's memberships, workspace, user. ARGV: workspace id, role. Returns 0 when the user or workspace does not exist. */
const putMembership = new Script(`
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`);

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

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async createWorkspace(workspace: Workspace) {
    const stored: Workspace = { id: workspace.id, name: workspace.name, createdAt: workspace.createdAt };
    const keys = [this.#keys.workspace(workspace.id), this.#keys.workspaces()];
    const created = await this.#redis.runDurable(keys, (client) => createWorkspace.run(client, keys,
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
    const keys = [this.#keys.user(user.id), this.#keys.email(user.email), this.#keys.users()];
    const created = await this.#redis.runDurable(keys, (client) => createUser.run(client, keys, [JSON.stringify(stored), user.id]));
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
    const keys = [this.#keys.memberships(membership.userId), this.#keys.workspace(membership.workspaceId), this.#keys.user(membership.userId)];
    const stored = await this.#redis.runDurable(keys, (client) => putMembership.run(client, keys, [membership.workspaceId, membership.role]));
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
