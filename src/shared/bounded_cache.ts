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
export function boundedCache<K extends {}, V extends {}>({ max, ttlMs, clock = systemClock }: BoundedCacheOptions): LRUCache<K, V> {
  return new LRUCache<K, V>({
    max,
    ...(ttlMs === undefined ? {} : { ttl: ttlMs }),
    // Read afresh at every check, not rounded to a timer's tick, so a moved test clock counts at once.
    ttlResolution: 0,
    perf: { now: clock },
  });
}

export type BoundedCache<K extends {}, V extends {}> = LRUCache<K, V>;
