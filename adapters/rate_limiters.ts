import { RateLimiterMemory, type RateLimiterAbstract } from 'rate-limiter-flexible';

import type { RateLimitRule } from './store.ts';

/**
 * The backends' rate limiters (Store.rateLimiter). Counts are fixed windows: a key's first point
 * opens its window, and the window's end forgets the key. A store makes one limiter per name and
 * gives it again when asked again, so counts under one name are the store's, on every backend.
 */
export type RateLimiters = (rule: RateLimitRule) => RateLimiterAbstract;

export function memoryRateLimiter({ points, duration }: RateLimitRule, keyPrefix: string): RateLimiterAbstract {
  return new RateLimiterMemory({ keyPrefix, points, duration });
}

const RULE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** One limiter per name; asking for a name with another rule is a bug. */
export function oncePerName(create: (rule: RateLimitRule) => RateLimiterAbstract): RateLimiters {
  const limiters = new Map<string, { rule: RateLimitRule; limiter: RateLimiterAbstract }>();
  return (rule) => {
    const known = limiters.get(rule.name);
    if (known) {
      if (known.rule.points !== rule.points || known.rule.duration !== rule.duration) {
        throw new TypeError(`the rate limiter "${rule.name}" counts ${known.rule.points} per ${known.rule.duration}s already`);
      }
      return known.limiter;
    }
    const limiter = create(checked(rule));
    limiters.set(rule.name, { rule: { ...rule }, limiter });
    return limiter;
  };
}

function checked(rule: RateLimitRule): RateLimitRule {
  if (!RULE_NAME.test(rule.name)) throw new TypeError(`a rate limiter's name is letters, digits, "-" and "_", got "${rule.name}"`);
  if (!Number.isInteger(rule.points) || rule.points < 1) throw new TypeError(`a rate limiter's points are a whole number above 0, got ${rule.points}`);
  if (!Number.isInteger(rule.duration) || rule.duration < 1) throw new TypeError(`a rate limiter's duration is whole seconds above 0, got ${rule.duration}`);
  return rule;
}
