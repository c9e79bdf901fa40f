import { createHmac } from 'node:crypto';

import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

import type { RateLimitRule, Store } from '../../adapters/store.ts';
import { boundedCache } from '../shared/bounded_cache.ts';

/** What the key the counters' digests are keyed with is derived for (KeyRing.derivedKeys). */
export const COUNTED_KEYS_PURPOSE = 'rate limit keys';

/**
 * The counters of one service, in the store's rate limiters, each key counted under its HMAC with
 * a key derived from the key-encryption key: an email or a client_id someone typed never lands in
 * the store as it was typed (a password pasted into the email field included), nor as a digest
 * anyone could compute from a guess at it, and every key has the same short length, whatever was
 * sent. Every instance derives the same key, so they share their counts.
 */
export class Counters {
  readonly #store: Store;
  readonly #secret: Uint8Array;
  /** Keys seen lately (an address, a client_id) and their digests: a key is hashed once, not at every count. */
  readonly #digests = boundedCache<string, string>({ max: 10_000 });

  constructor(store: Store, secret: Uint8Array) {
    this.#store = store;
    this.#secret = secret;
  }

  counter(rule: RateLimitRule): Counter {
    return new Counter(this.#store.rateLimiter(rule), rule, (key) => this.#digest(key));
  }

  #digest(key: string): string {
    let known = this.#digests.get(key);
    if (known === undefined) {
      known = createHmac('sha256', this.#secret).update(key).digest('base64url').slice(0, 22);
      this.#digests.set(key, known);
    }
    return known;
  }
}

/** One rate limit: the store's limiter for its rule, counting each key under its digest (Counters). */
export class Counter {
  readonly rule: RateLimitRule;
  readonly #limiter: RateLimiterAbstract;
  readonly #digest: (key: string) => string;

  constructor(limiter: RateLimiterAbstract, rule: RateLimitRule, digest: (key: string) => string) {
    this.rule = rule;
    this.#limiter = limiter;
    this.#digest = digest;
  }

  /** Counts one for `key`: undefined while within the rule, else the seconds until the key's window ends. */
  async take(key: string): Promise<number | undefined> {
    return refusal(() => this.#limiter.consume(this.#digest(key)));
  }

  /**
   * Counts one for `key` as `take` does, unless the key already has a count: then it counts
   * nothing and answers the seconds left on it. A new key's window is `seconds` long.
   * So of many callers racing, exactly one gets through.
   */
  async takeOnly(key: string, seconds: number): Promise<number | undefined> {
    return refusal(() => this.#limiter.consume(this.#digest(key), this.rule.points, { customDuration: seconds }));
  }

  /** Counts one for `key` without ever refusing; the key's count with it. */
  async add(key: string): Promise<number> {
    return (await this.#limiter.penalty(this.#digest(key))).consumedPoints;
  }

  /** Counts nothing: undefined while the key is within the rule, else the seconds until its window ends. */
  async waitIfSpent(key: string): Promise<number | undefined> {
    const held = await this.#limiter.get(this.#digest(key));
    return held && held.msBeforeNext > 0 && held.consumedPoints >= this.rule.points ? seconds(held.msBeforeNext) : undefined;
  }

  /** The key's count (0 when it has none). */
  async count(key: string): Promise<number> {
    const held = await this.#limiter.get(this.#digest(key));
    return held && held.msBeforeNext > 0 ? held.consumedPoints : 0;
  }

  /** Takes back one counted for `key`. */
  async giveBack(key: string): Promise<void> {
    await this.#limiter.reward(this.#digest(key));
  }

  /** Seconds left on the key's count; undefined when it has none. */
  async secondsLeft(key: string): Promise<number | undefined> {
    const held = await this.#limiter.get(this.#digest(key));
    return held && held.msBeforeNext > 0 ? seconds(held.msBeforeNext) : undefined;
  }

  /** Refuses the key for `duration` seconds, whatever its count. */
  async hold(key: string, duration: number): Promise<void> {
    await this.#limiter.block(this.#digest(key), duration);
  }

  async forget(key: string): Promise<void> {
    await this.#limiter.delete(this.#digest(key));
  }
}

async function refusal(consume: () => Promise<RateLimiterRes>): Promise<number | undefined> {
  try {
    await consume();
    return undefined;
  } catch (error) {
    // A refusal; anything else is a fault (the Redis limiter falls back to memory on its own).
    if (error instanceof RateLimiterRes) return seconds(error.msBeforeNext);
    throw error;
  }
}

/** Whole seconds, at least 1 (Retry-After). */
function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
