import { nowSeconds } from '../../src/shared/clock.ts';
import { NOW_MS, type RedisClient, type RedisConnection, Script } from './connection.ts';
import type { RedisKeys } from './keys.ts';
import { DuplicateError, type ApiKeyRecord, type ApiKeyStore } from '../store.ts';

/** Creation-order slots per second of createdAt in a workspace's key list: scores stay exact integers (below 2^53) until the year 2242. */
const API_KEY_SLOTS_PER_SECOND = 2 ** 20;

/**
 * Creates an API key unless its id or digest is taken. KEYS: key, digest, the workspace's key list.
 * ARGV: id, workspace id, name, digest, hint, createdAt, expiresAt ('' never). Returns 1, 0 (digest
 * taken) or -1 (id taken).
 *
 * The list is ordered as SQLite orders it (createdAt, then insertion): the score is
 * createdAt * slots, plus one more than the last key of the same createdAt. An expiring key's
 * entries expire with it; the list lives at least as long as its longest-lived key: PERSIST for a
 * key that never expires, else its expiry when that is later (compared here, as EXPIREAT GT needs
 * Redis 7). It is not shortened when keys go: ids left behind are dropped when it is next listed.
 */
const createApiKey = new Script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local key = { 'w', ARGV[2], 'n', ARGV[3], 'd', ARGV[4], 'h', ARGV[5], 'c', ARGV[6] }
if ARGV[7] ~= '' then key[#key + 1] = 'e'; key[#key + 1] = ARGV[7] end
redis.call('HSET', KEYS[1], unpack(key))
redis.call('SET', KEYS[2], ARGV[1])

local slots = ${API_KEY_SLOTS_PER_SECOND}
local first = tonumber(ARGV[6]) * slots
local previous = redis.call('ZREVRANGEBYSCORE', KEYS[3], string.format('%d', first + slots - 1), string.format('%d', first), 'WITHSCORES', 'LIMIT', 0, 1)[2]
local score = first
if previous then score = tonumber(previous) + 1 end
local listTtl = redis.call('PTTL', KEYS[3])
redis.call('ZADD', KEYS[3], string.format('%d', score), ARGV[1])

if ARGV[7] == '' then
  redis.call('PERSIST', KEYS[3])
  return 1
end
redis.call('EXPIREAT', KEYS[1], ARGV[7])
redis.call('EXPIREAT', KEYS[2], ARGV[7])
${NOW_MS}
-- listTtl: -2 the list is new, -1 it holds a key that never expires.
if listTtl == -2 or (listTtl >= 0 and tonumber(now) + listTtl < tonumber(ARGV[7]) * 1000) then
  redis.call('EXPIREAT', KEYS[3], ARGV[7])
end
return 1
`);

/**
 * Deletes an API key, its digest entry and its place in the workspace's list. KEYS: key, digest,
 * list. ARGV: id, and the digest and workspace id the caller read from the key. Returns 1, 0 when
 * there is no such key, or -1 when it no longer has that digest or workspace (read it again).
 */
const deleteApiKey = new Script(`
local stored = redis.call('HMGET', KEYS[1], 'd', 'w')
if not stored[1] then return 0 end
if stored[1] ~= ARGV[2] or stored[2] ~= ARGV[3] then return -1 end
redis.call('DEL', KEYS[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
`);

/**
 * Records a use of a key that exists (never bringing back a deleted or expired one; HSET keeps its
 * TTL), and never moves the last use back. KEYS: key. ARGV: lastUsedAt.
 */
const touchApiKey = new Script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local last = redis.call('HGET', KEYS[1], 'l')
if last and tonumber(last) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'l', ARGV[1])
return 1
`);

/**
 * API keys under the `{apikeys}` hash tag (key layout: keys.ts). An expiring key's entries
 * expire with it; reads also check expiresAt against this process's clock, so a key is gone for
 * every read from its expiry on, whether or not Redis has evicted it yet.
 */
export class RedisApiKeyStore implements ApiKeyStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async create(key: ApiKeyRecord) {
    const keys = [this.#keys.apiKey(key.id), this.#keys.apiKeyDigest(key.digest), this.#keys.apiKeys(key.workspaceId)];
    const created = await this.#redis.runDurable(keys, (client) => createApiKey.run(client, keys,
      [key.id, key.workspaceId, key.name, key.digest, key.hint, key.createdAt, key.expiresAt ?? '']));
    if (created === 0) throw new DuplicateError('an API key with this digest exists');
    if (created === -1) throw new DuplicateError(`an API key with id ${key.id} exists`);
  }

  findByDigest(digest: string) {
    return this.#redis.run(async (client) => {
      const id = await client.get(this.#keys.apiKeyDigest(digest));
      if (id === null) return undefined;
      const key = await this.#read(client, id);
      return key?.digest === digest ? key : undefined;
    });
  }

  get(id: string) {
    return this.#redis.run((client) => this.#read(client, id));
  }

  list(workspaceId: string) {
    return this.#redis.run(async (client) => {
      const index = this.#keys.apiKeys(workspaceId);
      const ids = await client.zrange(index, 0, '-1');
      const stored = await Promise.all(ids.map((id) => client.hgetall(this.#keys.apiKey(id))));
      // Keys Redis has expired (or a delete interrupted) leave their ids here; dropped where noticed.
      const gone = ids.filter((_, i) => !isStored(stored[i]!));
      if (gone.length) await client.zrem(index, ...gone);
      return ids.flatMap((id, i) => live(toKey(id, stored[i]!)) ?? []);
    });
  }

  delete(id: string) {
    return this.#redis.runDurable([this.#keys.apiKey(id)], async (client) => {
      for (;;) {
        const [digest, workspaceId] = await client.hmget(this.#keys.apiKey(id), 'd', 'w');
        if (!digest || !workspaceId) return false;
        const deleted = await deleteApiKey.run(client,
          [this.#keys.apiKey(id), this.#keys.apiKeyDigest(digest), this.#keys.apiKeys(workspaceId)], [id, digest, workspaceId]);
        // -1: deleted and created again with another digest or workspace since it was read; read it again.
        if (deleted !== -1) return deleted === 1;
      }
    });
  }

  async touch(id: string, lastUsedAt: number) {
    await this.#redis.run((client) => touchApiKey.run(client, [this.#keys.apiKey(id)], [lastUsedAt]));
  }

  async #read(client: RedisClient, id: string): Promise<ApiKeyRecord | undefined> {
    return live(toKey(id, await client.hgetall(this.#keys.apiKey(id))));
  }
}

function isStored(hash: Record<string, string>): boolean {
  return hash.d !== undefined;
}

/** The key from its hash (HGETALL: empty when there is no such key). */
function toKey(id: string, hash: Record<string, string>): ApiKeyRecord | undefined {
  if (!isStored(hash)) return undefined;
  return {
    id,
    workspaceId: hash.w!,
    name: hash.n!,
    digest: hash.d!,
    hint: hash.h!,
    createdAt: Number(hash.c),
    ...(hash.e === undefined ? {} : { expiresAt: Number(hash.e) }),
    ...(hash.l === undefined ? {} : { lastUsedAt: Number(hash.l) }),
  };
}

/** The key unless it has expired by this process's clock, as the SQLite store decides. */
function live(key: ApiKeyRecord | undefined): ApiKeyRecord | undefined {
  return key && (key.expiresAt === undefined || key.expiresAt > nowSeconds()) ? key : undefined;
}
