import { redisRateLimiters } from './rate_limiters.ts';
import { RedisAccountStore } from './redis_accounts.ts';
import { RedisApiKeyStore } from './redis_api_keys.ts';
import { connectRedis, RedisConnection } from './redis_connection.ts';
import { RedisKeys } from './redis_keys.ts';
import { RedisModelStore } from './redis_models.ts';
import { RedisRecordStore } from './redis_records.ts';
import { RedisRevocationStore } from './redis_revocations.ts';
import { compareAndSetSetting, setIfAbsent } from './redis_scripts.ts';
import type { ModelStore, SettingStore, Store } from './store.ts';

export interface RedisStoreOptions {
  /** Starts every key, so several services (or tests) can share one Redis. Default `oauth:`. */
  keyPrefix?: string;
}

/**
 * The store on Redis: one server, a Sentinel-managed master or a cluster (redis_url.ts). Opening
 * is synchronous; the connection is made in the background and operations wait for it a bounded
 * time (redis_connection.ts).
 */
export function openRedisStore(url: string, options: RedisStoreOptions = {}): Store {
  const keys = new RedisKeys(options.keyPrefix ?? 'oauth:');
  const client = connectRedis(url);
  const redis = new RedisConnection(client);
  const models = new Map<string, ModelStore>();

  return {
    kind: 'redis',
    model(name) {
      let store = models.get(name);
      if (!store) {
        store = new RedisModelStore(redis, keys, name);
        models.set(name, store);
      }
      return store;
    },
    accounts: new RedisAccountStore(redis, keys),
    settings: new RedisSettingStore(redis, keys),
    revocations: new RedisRevocationStore(redis, keys),
    records: new RedisRecordStore(redis, keys),
    apiKeys: new RedisApiKeyStore(redis, keys),
    rateLimiter: redisRateLimiters(client, keys),
    async ping() {
      await redis.run((client) => client.ping());
    },
    // Redis acknowledges each write before its promise resolves: nothing is left pending.
    committed: () => Promise.resolve(),
    close: () => redis.close(),
  };
}

/** Settings in one hash, without a TTL. */
class RedisSettingStore implements SettingStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  get(name: string) {
    return this.#redis.run(async (client) => (await client.hget(this.#keys.settings(), name)) ?? undefined);
  }

  async setIfAbsent(name: string, value: string) {
    return this.#redis.run(async (client) => await setIfAbsent.run(client, [this.#keys.settings()], [name, value]) as string);
  }

  async put(name: string, value: string) {
    await this.#redis.run((client) => client.hset(this.#keys.settings(), name, value));
  }

  async compareAndSet(name: string, expected: string, value: string) {
    return this.#redis.run(async (client) => await compareAndSetSetting.run(client, [this.#keys.settings()], [name, expected, value]) === 1);
  }
}
