import { RedisAccountStore } from './accounts.ts';
import { RedisApiKeyStore } from './api_keys.ts';
import { connectRedis, RedisConnection, watchSentinelFailovers } from './connection.ts';
import { RedisKeys } from './keys.ts';
import { ListedRecords } from './listed_records.ts';
import { RedisModelStore } from './models.ts';
import { redisRateLimiters } from './rate_limits.ts';
import { RedisRecordStore } from './records.ts';
import { RedisRevocationStore } from './revocations.ts';
import { RedisSettingStore } from './settings.ts';
import type { Logger } from '../../src/shared/logger.ts';
import type { ModelStore, ReplicaWait, Store } from '../store.ts';

export interface RedisStoreOptions {
  /** Starts every key, so several services (or tests) can share one Redis. Default `oauth:`. */
  keyPrefix?: string;
  /** REDIS_WAIT_REPLICAS: writes wait for replicas (connection.ts runDurable). */
  replicaWait?: ReplicaWait | undefined;
  /** Hears of a sentinel the store does not listen to (sentinel_failovers.ts). */
  warn?: Logger['warn'] | undefined;
}

/**
 * The store on Redis: one server, a Sentinel-managed master or a cluster (url.ts). Opening
 * is synchronous; the connection is made in the background and operations wait for it a bounded
 * time (connection.ts).
 */
export function openRedisStore(url: string, options: RedisStoreOptions = {}): Store {
  const keys = new RedisKeys(options.keyPrefix ?? 'oauth:');
  const failovers = watchSentinelFailovers(url, options.warn);
  const client = connectRedis(url, 0, failovers);
  // The connection of the writes that wait for replicas: a write may queue behind a WAIT as long as it takes.
  const durable = options.replicaWait && { client: connectRedis(url, options.replicaWait.timeoutMs, failovers), wait: options.replicaWait };
  const redis = new RedisConnection(client, durable, failovers);
  const models = new Map<string, ModelStore>();
  const listed = new ListedRecords(keys);

  return {
    kind: 'redis',
    model(name) {
      let store = models.get(name);
      if (!store) {
        store = new RedisModelStore(redis, keys, name, listed);
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
      // A write, not PING: a Redis that answers but refuses writes (a replica the URL still names
      // after a failover, one out of memory or short of min-replicas-to-write) serves no sign-in
      // and no token. Written and deleted in one transaction, so nothing stays; refused, it is
      // discarded whole. Not waited for by replicas: it checks the node, not the replication.
      await redis.run((client) => client.multi().set(keys.readiness(), '1').del(keys.readiness()).exec());
    },
    // Each write is acknowledged before its promise resolves (with REDIS_WAIT_REPLICAS, once replicas hold it): nothing is pending.
    committed: () => Promise.resolve(),
    close: () => redis.close(),
  };
}
