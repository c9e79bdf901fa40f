import { LRUCache } from 'lru-cache';

import { systemClock, type Clock } from './clock.ts';

export interface BoundedCacheOptions {
  /** Entries kept at most; past it, the least recently used goes first. */
  max: number;
  /** How long an entry is served after it was set, in milliseconds; without it, until evicted (or `set` gives one). */
  ttlMs?: number;
  /** Read for the entries' age (tests move it); the system clock by default. */
  clock?: Clock;
}

/**
 * The service's one in-process cache: bounded in entries, least recently used out first, entries
 * optionally expiring (lru-cache). Every copy the service keeps of something read from the store,
 * or worked out at a cost (a verified token, a client record, a live role), is kept in one of these.
 */
export function boundedCache<K extends {}, V extends {}>({ max, ttlMs, clock = systemClock }: BoundedCacheOptions): BoundedCache<K, V> {
  return new BoundedCache<K, V>({
    max,
    ...(ttlMs === undefined ? {} : { ttl: ttlMs }),
    // Read afresh at every check, not rounded to a timer's tick, so a moved test clock counts at once.
    ttlResolution: 0,
    perf: { now: clock },
  });
}

/**
 * An LRUCache that keeps a string key as a copy of its own. A string read from a request (a
 * client_id from a form body, a token, a resource) is often V8's slice of the whole body, and a
 * cache that kept the slice would keep the body, with the client secret, code or refresh token it
 * carried, for as long as the entry: count-bounded entries of unbounded size, and credentials in
 * the process's memory long after their request.
 */
export class BoundedCache<K extends {}, V extends {}> extends LRUCache<K, V> {
  override set(key: K, value: V | undefined, options?: LRUCache.SetOptions<K, V, unknown>): this {
    return super.set(ownKey(key), value, options);
  }
}

/** A string key copied into memory of its own (through UTF-16 code units, so even a lone surrogate survives); any other key as it is. */
function ownKey<K>(key: K): K {
  if (typeof key !== 'string') return key;
  return Buffer.from(key, 'utf16le').toString('utf16le') as typeof key;
}
