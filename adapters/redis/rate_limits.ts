import { RateLimiterRedis } from 'rate-limiter-flexible';

import { memoryRateLimiter, oncePerName, type RateLimiters } from '../rate_limiters.ts';
import type { RedisClient } from './connection.ts';
import type { RedisKeys } from './keys.ts';

/**
 * Counts in Redis, one key per counted key (`<prefix>rl:<name>:<key>`, with the window's TTL),
 * shared by every process on that Redis. When Redis is not connected a call does not wait for it
 * (`rejectIfRedisNotReady`), and when a call fails (not connected, or no answer within the
 * connection's command timeout) the count is kept in this process instead (`insuranceLimiter`):
 * an outage loosens the limits to one process's view for a while, it never turns a request into
 * an error. Requests that need the store still answer 503 on their own.
 */
export function redisRateLimiters(client: RedisClient, keys: RedisKeys): RateLimiters {
  return oncePerName((rule) => new RateLimiterRedis({
    storeClient: client,
    keyPrefix: keys.rateLimit(rule.name),
    points: rule.points,
    duration: rule.duration,
    rejectIfRedisNotReady: true,
    insuranceLimiter: memoryRateLimiter(rule, keys.rateLimit(rule.name)),
  }));
}
