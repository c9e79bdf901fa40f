import type { RedisClient, RedisConnection } from './redis_connection.ts';
import type { RedisKeys } from './redis_keys.ts';
import { createApiKey, deleteApiKey, touchApiKey } from './redis_record_scripts.ts';
import { DuplicateError, type ApiKeyRecord, type ApiKeyStore } from './store.ts';

const now = () => Math.floor(Date.now() / 1000);

/**
 * API keys under the `{apikeys}` hash tag (key layout: redis_keys.ts). An expiring key's entries
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
    const created = await this.#redis.run((client) => createApiKey.run(client,
      [this.#keys.apiKey(key.id), this.#keys.apiKeyDigest(key.digest), this.#keys.apiKeys(key.workspaceId)],
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
    return this.#redis.run(async (client) => {
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
  return key && (key.expiresAt === undefined || key.expiresAt > now()) ? key : undefined;
}
