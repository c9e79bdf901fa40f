import { Script } from './redis_connection.ts';

/**
 * The Lua the Redis store runs, each script one atomic step. A script touches only the keys it is
 * given in KEYS, and those share a hash tag (or are one key), so each runs on one cluster node.
 * Times: expiries of engine records are milliseconds since the epoch, revocation times seconds;
 * "now" inside a script is the server's clock (TIME), the clock that expires keys.
 */

/** Numbers go to Redis as integer strings (%d): how Lua would print a 13-digit millisecond time is left to no version's choice. */
export const NOW_MS = `
local time = redis.call('TIME')
local now = string.format('%d', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
`;

/**
 * Engine record (a hash: p = payload JSON, c = consumed-at seconds, g = grant id, u = uses), replaced
 * whole so an earlier consumption or count of uses does not carry over. KEYS: record. ARGV: payload,
 * expiry ms ('' none), grant id ('' none). Returns the PTTL the record had before (-1: kept without a lifetime).
 */
export const upsertRecord = new Script(`
local previous = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
if ARGV[3] == '' then
  redis.call('HSET', KEYS[1], 'p', ARGV[1])
else
  redis.call('HSET', KEYS[1], 'p', ARGV[1], 'g', ARGV[3])
end
if ARGV[2] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[2]) end
return previous
`);

/**
 * Marks a record consumed, for exactly one caller. Nothing is written unless the record exists
 * (so an expired or destroyed one is never brought back, and never without a TTL), and a field
 * written into an existing hash keeps the key's TTL. KEYS: record. ARGV: timestamp. Returns 1 or 0.
 */
export const consumeRecord = new Script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HSETNX', KEYS[1], 'c', ARGV[1])
`);

/**
 * Counts one use of a record unless it already has ARGV[1] (u = uses). Like consumeRecord, nothing is
 * written unless the record exists, and the field written keeps the key's TTL. An upsert replaces
 * the hash, so the count starts again. KEYS: record. ARGV: limit. Returns the uses with this one, or 0.
 */
export const countRecordUse = new Script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'u') or '0') >= tonumber(ARGV[1]) then return 0 end
return redis.call('HINCRBY', KEYS[1], 'u', 1)
`);

/**
 * Deletes a record and returns {payload, PTTL before} so its lookup entries can be removed too;
 * nil when it is gone or (for a revocation) belongs to another grant than ARGV[1] ('' any).
 */
export const takeRecord = new Script(`
local fields = redis.call('HMGET', KEYS[1], 'p', 'g')
if not fields[1] then return false end
if ARGV[1] ~= '' and fields[2] ~= ARGV[1] then return false end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
return { fields[1], ttl }
`);

/** Deletes a uid or user-code entry only while it still points at record ARGV[1] (another record may have taken it since). */
export const deleteLookup = new Script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

/**
 * A grant's index of one model's records (and likewise a listBy index, redis_keys.ts listedBy): a sorted set of record ids scored by the record's expiry
 * (ms, or +inf). Expired members are dropped whenever it is touched, and the key lives exactly as
 * long as its longest-lived member (an absolute PEXPIREAT to the highest score: like EXPIRE GT when
 * a member is added, and also shortened when the longest-lived member has gone).
 * KEYS: index. ARGV: record id, its expiry.
 */
export const addGrantMember = new Script(`${NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local furthest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]
if furthest == nil then return 0 end
if furthest == 'inf' then redis.call('PERSIST', KEYS[1]) else redis.call('PEXPIREAT', KEYS[1], furthest) end
return 1
`);

/** Drops a grant index's expired members and returns the live ones. KEYS: index. */
export const liveGrantMembers = new Script(`${NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`);

/** KEYS: workspace, workspaces (sorted by createdAt, then id). ARGV: JSON, createdAt, id. Returns 0 when the id is taken. */
export const createWorkspace = new Script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
`);

/**
 * Claims the email (SET NX) and writes the user in one step, so two sign-ups with one email
 * cannot both succeed. KEYS: user, email, users. ARGV: JSON, id.
 * Returns 1, 0 (email taken) or -1 (id taken).
 */
export const createUser = new Script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if not redis.call('SET', KEYS[2], ARGV[2], 'NX') then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
return 1
`);

/** KEYS: the user's memberships, workspace, user. ARGV: workspace id, role. Returns 0 when the user or workspace does not exist. */
export const putMembership = new Script(`
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`);

/** KEYS: the user's memberships, workspaces. Returns {workspace id, role, createdAt}... for workspaces that exist. */
export const listMemberships = new Script(`
local memberships = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #memberships, 2 do
  local createdAt = redis.call('ZSCORE', KEYS[2], memberships[i])
  if createdAt then
    out[#out + 1] = memberships[i]
    out[#out + 1] = memberships[i + 1]
    out[#out + 1] = createdAt
  end
end
return out
`);

/** KEYS: settings hash. ARGV: name, value. Returns the stored value: the first writer's. */
export const setIfAbsent = new Script(`
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
return redis.call('HGET', KEYS[1], ARGV[1])
`);

/** KEYS: settings hash. ARGV: name, expected value, new value. Returns 1 when it replaced the value, 0 when it held another (or none). */
export const compareAndSetSetting = new Script(`
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
`);

/**
 * Adds or widens a revocation. KEYS: entries (hash key -> JSON), log (sorted set key -> position),
 * expiry (sorted set key -> expiresAt), position (the last one given). ARGV: key, owner ('' none),
 * issuedBefore, expiresAt.
 *
 * A position is max(last + 1, now in ms): it always grows, also once every key here has expired
 * with the last entry or Redis lost its data, so an instance's cursor from before never hides
 * new entries. Up to 100 expired entries are forgotten per write, so a write costs the same
 * however long the list is; reads skip the rest, and the keys expire with the last live entry.
 */
export const addRevocation = new Script(`
local time = redis.call('TIME')
local now = tonumber(time[1])
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', time[1], 'LIMIT', 0, 100)
if #expired > 0 then
  redis.call('HDEL', KEYS[1], unpack(expired))
  redis.call('ZREM', KEYS[2], unpack(expired))
  redis.call('ZREM', KEYS[3], unpack(expired))
end
local entry = { key = ARGV[1], issuedBefore = tonumber(ARGV[3]), expiresAt = tonumber(ARGV[4]) }
if ARGV[2] ~= '' then entry.owner = ARGV[2] end
local previous = redis.call('HGET', KEYS[1], ARGV[1])
if previous then
  local old = cjson.decode(previous)
  entry.issuedBefore = math.max(entry.issuedBefore, old.issuedBefore)
  entry.expiresAt = math.max(entry.expiresAt, old.expiresAt)
  if entry.owner == nil then entry.owner = old.owner end
end
local ms = now * 1000 + math.floor(tonumber(time[2]) / 1000)
local position = string.format('%d', math.max(tonumber(redis.call('GET', KEYS[4]) or '0') + 1, ms))
redis.call('SET', KEYS[4], position)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(entry))
redis.call('ZADD', KEYS[2], position, ARGV[1])
redis.call('ZADD', KEYS[3], string.format('%d', entry.expiresAt), ARGV[1])
local furthest = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]
for i = 1, 4 do redis.call('EXPIREAT', KEYS[i], furthest) end
return position
`);

/**
 * Entries written after position ARGV[1]. KEYS: log, entries. Returns {now (s), position, JSON,
 * position, JSON...}, oldest first; the caller skips the expired ones (still listed, so its cursor
 * moves past them).
 */
export const revocationsSince = new Script(`
local now = redis.call('TIME')[1]
local log = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES')
local out = { now }
for i = 1, #log, 2 do
  local entry = redis.call('HGET', KEYS[2], log[i])
  if entry then
    out[#out + 1] = log[i + 1]
    out[#out + 1] = entry
  end
end
return out
`);
