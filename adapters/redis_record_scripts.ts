import { Script } from './redis_connection.ts';
import { NOW_MS } from './redis_scripts.ts';

/**
 * The Lua of the data API's stores: records (keys under one workspace's `{data:<id>}` tag) and
 * API keys (under `{apikeys}`). Conventions as in redis_scripts.ts: a script touches only its
 * KEYS, which share one hash tag.
 */

/**
 * Creates a record unless its id is taken. KEYS: record, order, position. ARGV: id, createdAt,
 * updatedAt, then hash field / value JSON pairs. Returns the position, or nil when the id is taken.
 *
 * A position is max(last + 1, now in ms), as revocation positions are: it grows also after the
 * position key is gone with the object's last record (deleteRecord), so no position is reused.
 * SET also clears the TTL deleteRecord may have given the position key.
 */
export const createRecord = new Script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
${NOW_MS}
local position = string.format('%d', math.max(tonumber(redis.call('GET', KEYS[3]) or '0') + 1, tonumber(now)))
redis.call('SET', KEYS[3], position)
redis.call('HSET', KEYS[1], '$p', position, '$c', ARGV[2], '$u', ARGV[3], unpack(ARGV, 4))
redis.call('ZADD', KEYS[2], position, ARGV[1])
return position
`);

/**
 * Merges changes into a record that exists (never recreating a deleted one): fields set and
 * cleared in one step, so concurrent updates of different fields both stay. KEYS: record.
 * ARGV: updatedAt, n, then n field / value JSON pairs to set, then the fields to clear.
 * Returns the record's fields and values after the merge (HGETALL), or nil when there is no record.
 */
export const updateRecord = new Script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local last = 2 + 2 * tonumber(ARGV[2])
redis.call('HSET', KEYS[1], '$u', ARGV[1], unpack(ARGV, 3, last))
if #ARGV > last then redis.call('HDEL', KEYS[1], unpack(ARGV, last + 1)) end
return redis.call('HGETALL', KEYS[1])
`);

/**
 * Deletes a record and its place in the order. KEYS: record, order, position. ARGV: id. Returns 1, or 0 when there was none.
 *
 * With the object's last record gone, the position key is only needed until the clock has passed
 * it (positions run ahead of the clock when records come faster than one a millisecond): it
 * expires the millisecond after its value, at once unless they ran ahead, so no key is left behind
 * and createRecord's max(last + 1, now) still starts above it. (Not at its value: PEXPIREAT to the
 * current millisecond deletes at once, and a position given in that millisecond would repeat it.)
 */
export const deleteRecord = new Script(`
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then
  local last = redis.call('GET', KEYS[3])
  if last then redis.call('PEXPIREAT', KEYS[3], string.format('%d', tonumber(last) + 1)) end
end
return 1
`);

/** Creation-order slots per second of createdAt in a workspace's key list: scores stay exact integers (below 2^53) until the year 2242. */
export const API_KEY_SLOTS_PER_SECOND = 2 ** 20;

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
export const createApiKey = new Script(`
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
export const deleteApiKey = new Script(`
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
export const touchApiKey = new Script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local last = redis.call('HGET', KEYS[1], 'l')
if last and tonumber(last) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'l', ARGV[1])
return 1
`);
