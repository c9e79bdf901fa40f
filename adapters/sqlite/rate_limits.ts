import { memoryRateLimiter, oncePerName, type RateLimiters } from '../rate_limiters.ts';

/** The embedded store's limiters: in this process only (with WORKERS above 1, each worker counts alone). */
export function memoryRateLimiters(): RateLimiters {
  return oncePerName((rule) => memoryRateLimiter(rule, rule.name));
}
