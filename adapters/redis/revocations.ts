import { type RedisConnection, Script } from './connection.ts';
import type { RedisKeys } from './keys.ts';
import type { RevocationEntry, RevocationStore } from '../store.ts';

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
const addRevocation = new Script(`
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
const revocationsSince = new Script(`
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

/** The revocation list under the `{revocations}` hash tag; the scripts above describe its keys. */
export class RedisRevocationStore implements RevocationStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async add(entry: RevocationEntry) {
    const keys = this.#keys.revocations();
    await this.#redis.runDurable(keys, (client) => addRevocation.run(client, keys, [entry.key, entry.owner ?? '', entry.issuedBefore, entry.expiresAt]));
  }

  changesSince(cursor: number) {
    return this.#redis.run(async (client) => {
      const [entries, log] = this.#keys.revocations();
      const [now, ...rows] = await revocationsSince.run(client, [log, entries], [cursor]) as string[];
      const live: RevocationEntry[] = [];
      let next = cursor;
      for (let i = 0; i < rows.length; i += 2) {
        next = Number(rows[i]);
        const stored = JSON.parse(rows[i + 1]!) as RevocationEntry;
        if (stored.expiresAt <= Number(now)) continue;
        live.push({
          key: stored.key,
          ...(stored.owner ? { owner: stored.owner } : {}),
          issuedBefore: stored.issuedBefore,
          expiresAt: stored.expiresAt,
        });
      }
      return { entries: live, cursor: next };
    });
  }
}
