import { randomUUID } from 'node:crypto';

import { nowSeconds, systemClock } from '../../src/shared/clock.ts';
import { NOW_MS, type RedisClient, type RedisConnection, Script } from './connection.ts';
import type { RedisKeys } from './keys.ts';
import { type Completion, COMPLETION_MARK_SECONDS, listedValue, type ModelPayload, type ModelStore } from '../store.ts';

/**
 * Engine record (a hash: p = payload JSON, c = consumed-at seconds, k = the consumption's claim, g =
 * grant id, u = uses; or, once completed, a completion's mark: m = the claim alone), replaced
 * whole so an earlier consumption or count of uses does not carry over. KEYS: record. ARGV: payload,
 * expiry ms ('' none), grant id ('' none). Returns the PTTL the record had before (-1: kept without a lifetime).
 */
const upsertRecord = new Script(`
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
 * Marks a record consumed, for exactly one caller, and notes the caller's claim (k) so that only
 * it can give the consumption back or complete it. A consumption made at or before ARGV[3] (seconds;
 * '' never) is abandoned and taken over. One already made under this claim is the caller's: the
 * client sends a command again when the connection broke before its answer came. Nothing is written
 * unless the record exists (so an expired or destroyed one is never brought back, and never without
 * a TTL), and a field written into an existing hash keeps the key's TTL. KEYS: record. ARGV:
 * timestamp, claim, take over before. Returns 1 or 0.
 */
const consumeRecord = new Script(`
if redis.call('HEXISTS', KEYS[1], 'p') == 0 then return 0 end
local consumed = redis.call('HGET', KEYS[1], 'c')
if consumed and redis.call('HGET', KEYS[1], 'k') == ARGV[2] then return 1 end
if consumed and (ARGV[3] == '' or tonumber(consumed) > tonumber(ARGV[3])) then return 0 end
redis.call('HSET', KEYS[1], 'c', ARGV[1], 'k', ARGV[2])
return 1
`);

/** Gives back a consumption made under claim ARGV[1]. KEYS: record. */
const releaseRecord = new Script(`
if redis.call('HGET', KEYS[1], 'k') ~= ARGV[1] then return 0 end
return redis.call('HDEL', KEYS[1], 'c', 'k')
`);

/** Stores a record (p = payload ARGV[1], expiring at ARGV[2] ms) unless one exists. KEYS: record. Returns 1 or 0. */
const insertNewRecord = new Script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'p', ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
`);

/**
 * Counts one use of a record unless it already has ARGV[1] (u = uses). Like consumeRecord, nothing is
 * written unless the record exists, and the field written keeps the key's TTL. An upsert replaces
 * the hash, so the count starts again. KEYS: record. ARGV: limit. Returns the uses with this one, or 0.
 */
const countRecordUse = new Script(`
if redis.call('HEXISTS', KEYS[1], 'p') == 0 then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'u') or '0') >= tonumber(ARGV[1]) then return 0 end
return redis.call('HINCRBY', KEYS[1], 'u', 1)
`);

/**
 * Deletes a record and returns {payload, PTTL before} so its lookup entries can be removed too;
 * nil when it is gone or (for a revocation) belongs to another grant than ARGV[1] ('' any).
 */
const takeRecord = new Script(`
local fields = redis.call('HMGET', KEYS[1], 'p', 'g')
if not fields[1] then return false end
if ARGV[1] ~= '' and fields[2] ~= ARGV[1] then return false end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
return { fields[1], ttl }
`);

/**
 * Like takeRecord, for a record consumed under claim ARGV[1] only, which it replaces with the
 * completion's mark (m = the claim) for ARGV[2] seconds: returns {payload, PTTL before}. Else 0
 * when it is gone, 1 when it is not consumed under that claim (or another claim's mark; nothing
 * written), 2 when it is this claim's mark (completed before).
 */
const completeRecord = new Script(`
local fields = redis.call('HMGET', KEYS[1], 'p', 'k', 'c', 'm')
if not fields[1] then
  if not fields[4] then return 0 end
  if fields[4] == ARGV[1] then return 2 end
  return 1
end
if not fields[3] or fields[2] ~= ARGV[1] then return 1 end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'm', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return { fields[1], ttl }
`);

/** Deletes a completion's mark (m) of claim ARGV[1] only. KEYS: record. */
const forgetMark = new Script(`
if redis.call('HGET', KEYS[1], 'm') ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`);

/** Deletes a uid or user-code entry only while it still points at record ARGV[1] (another record may have taken it since). */
const deleteLookup = new Script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

/**
 * A grant's index of one model's records (and likewise a listBy index, keys.ts listedBy): a sorted set of record ids scored by the record's expiry
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

/**
 * Indexes a listed record that has a lifetime (keys.ts listExpiring) and takes out the members
 * that have expired, at most 100 at a time, returning them so they leave list() as well (another
 * key, maybe on another cluster node). The key lives as long as its longest-lived member.
 * KEYS: index. ARGV: record id, its expiry (ms).
 */
const addExpiringListed = new Script(`${NOW_MS}
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 100)
if #expired > 0 then redis.call('ZREM', KEYS[1], unpack(expired)) end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
return expired
`);

/**
 * The models whose records list() shows whatever their lifetime: clients, every one of which the
 * admin CLI lists, those on probation (UNUSED_CLIENT_TTL: a lifetime until first used) included.
 * Other records with a lifetime are not indexed for listing: that would be one more write per
 * token to one key shared by every instance, for a list nobody asks for.
 */
const LISTED_WHATEVER_THEIR_LIFETIME = new Set(['Client']);

/** What indexes, once, the records a store of an older version holds in no listing (listed_records.ts). */
interface ListedRecords {
  indexRecordsStoredBefore(client: RedisClient): Promise<void>;
}

/** Drops a grant index's expired members and returns the live ones. KEYS: index. */
const liveGrantMembers = new Script(`${NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`);

/**
 * One engine model in Redis (key layout: keys.ts). Every record and lookup entry expires
 * with the record's lifetime; records without one (clients) are also listed in an index for list(),
 * and grants and clients in an index by the value they are listed by (LISTED_BY) for listBy().
 */
export class RedisModelStore implements ModelStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;
  readonly #model: string;
  readonly #listed: ListedRecords;

  constructor(redis: RedisConnection, keys: RedisKeys, model: string, listed: ListedRecords) {
    this.#redis = redis;
    this.#keys = keys;
    this.#model = model;
    this.#listed = listed;
  }

  async upsert(id: string, payload: ModelPayload, expiresIn: number | undefined) {
    // One absolute expiry for the record and its lookup entries, so none outlives the others.
    const expiresAt = expiresIn ? Math.round(systemClock() + expiresIn * 1000) : undefined;
    const grantId = nonEmpty(payload.grantId);
    const uid = nonEmpty(payload.uid);
    const userCode = nonEmpty(payload.userCode);
    const listed = listedValue(this.#model, payload);
    const record = JSON.stringify(payload);
    const recordKey = this.#keys.record(this.#model, id);
    const grantIndex = grantId && this.#keys.grant(this.#model, grantId);
    const uidKey = uid && this.#keys.uid(this.#model, uid);
    const userCodeKey = userCode && this.#keys.userCode(this.#model, userCode);
    const listedWhateverItsLifetime = LISTED_WHATEVER_THEIR_LIFETIME.has(this.#model);
    const listKey = (expiresAt === undefined || listedWhateverItsLifetime) && this.#keys.list(this.#model);
    const expiringKey = listedWhateverItsLifetime && this.#keys.listExpiring(this.#model);
    const listedKey = listed && this.#keys.listedBy(this.#model, listed);
    const written = [recordKey, grantIndex, uidKey, userCodeKey, listKey, expiringKey, listedKey].filter((key) => typeof key === 'string');
    await this.#redis.runDurable(written, async (client, alsoWrote) => {
      // Lookup entries before the record: one whose record is missing is skipped when read, while
      // a record missing from its grant's index would survive revokeByGrantId.
      const lookups: Array<Promise<unknown>> = [];
      if (grantIndex) lookups.push(addGrantMember.run(client, [grantIndex], [id, expiresAt ?? '+inf']));
      if (uidKey) lookups.push(setLookup(client, uidKey, id, expiresAt));
      if (userCodeKey) lookups.push(setLookup(client, userCodeKey, id, expiresAt));
      if (listKey) lookups.push(client.zadd(listKey, 'NX', systemClock(), id));
      // Scored by expiry, like a grant's index: the entry goes with the record, the key with its last member.
      if (listedKey) lookups.push(addGrantMember.run(client, [listedKey], [id, expiresAt ?? '+inf']));
      if (expiringKey && expiresAt !== undefined) lookups.push(this.#indexExpiring(client, expiringKey, id, expiresAt));
      // Kept without a lifetime now (a client whose probation ended): not to leave list() at its old expiry.
      if (expiringKey && expiresAt === undefined) lookups.push(client.zrem(expiringKey, id));
      await Promise.all(lookups);
      const previousTtl = await upsertRecord.run(client, [recordKey], [record, expiresAt ?? '', grantId ?? '']);
      // Kept without a lifetime before, with one now: no longer one of the records list() shows.
      if (expiresAt !== undefined && previousTtl === -1 && !listedWhateverItsLifetime) {
        const unlisted = this.#keys.list(this.#model);
        await client.zrem(unlisted, id);
        alsoWrote([unlisted]);
      }
    });
  }

  /** Indexes a listed record with a lifetime, and takes the records that have expired out of list(). */
  async #indexExpiring(client: RedisClient, expiringKey: string, id: string, expiresAt: number): Promise<void> {
    const expired = await addExpiringListed.run(client, [expiringKey], [id, expiresAt]) as string[];
    if (expired.length) await client.zrem(this.#keys.list(this.#model), ...expired);
  }

  find(id: string) {
    return this.#redis.run((client) => this.#read(client, id));
  }

  findByUid(uid: string) {
    return this.#findBy(this.#keys.uid(this.#model, uid), 'uid', uid);
  }

  findByUserCode(userCode: string) {
    return this.#findBy(this.#keys.userCode(this.#model, userCode), 'userCode', userCode);
  }

  async consume(id: string, takeOverBefore?: number) {
    const record = this.#keys.record(this.#model, id);
    const claim = randomUUID();
    let sent = false;
    let won = false;
    try {
      await this.#redis.runDurable([record], async (client) => {
        sent = true;
        won = await consumeRecord.run(client, [record], [nowSeconds(), claim, takeOverBefore ?? '']) === 1;
      });
    } catch (error) {
      // Consumed on the primary, not confirmed by the replicas: the caller answers an outage, and
      // the client's retry with the same value must not be taken for a replay. Given back under
      // this claim only: after a failover, the promoted primary may hold another caller's instead.
      if (won) await this.release(id, claim).catch(() => undefined);
      // Sent, and its answer lost (Redis paused or slow past the command timeout): Redis may apply
      // it yet. Given back under this claim too, in the background so the outage is answered at
      // once; the undo keeps trying until Redis answers, after the consumption it may have applied.
      else if (sent) void this.release(id, claim).catch(() => undefined);
      throw error;
    }
    return won ? claim : undefined;
  }

  /**
   * An undo (connection.ts), through the connection that does not wait: after a refusal, the one
   * that does refuses writes until the replicas catch up.
   */
  async release(id: string, claim: string) {
    const record = this.#keys.record(this.#model, id);
    await this.#redis.undo((client) => releaseRecord.run(client, [record], [claim]));
  }

  async complete(id: string, claim: string) {
    const record = this.#keys.record(this.#model, id);
    let completion: Completion = 'gone';
    await this.#redis.runDurable([record], async (client) => {
      const taken = await completeRecord.run(client, [record], [claim, COMPLETION_MARK_SECONDS]);
      if (taken === 0) return;
      if (taken === 1) {
        completion = 'unclaimed';
        return;
      }
      completion = 'completed';
      if (taken !== 2) await this.#removeLookups(client, id, taken as [string, number], true);
    });
    return completion;
  }

  /** An undo, as release: not waited for by replicas. */
  async forgetCompletion(id: string, claim: string) {
    const record = this.#keys.record(this.#model, id);
    await this.#redis.undo((client) => forgetMark.run(client, [record], [claim]));
  }

  completionOf(id: string, claim: string) {
    return this.#redis.run(async (client): Promise<Completion | 'pending'> => {
      const [payload, consumedAt, consumedBy, completedBy] = await client.hmget(this.#keys.record(this.#model, id), 'p', 'c', 'k', 'm');
      if (payload === null || payload === undefined) {
        if (!completedBy) return 'gone';
        return completedBy === claim ? 'completed' : 'unclaimed';
      }
      return consumedAt && consumedBy === claim ? 'pending' : 'unclaimed';
    });
  }

  async insertNew(id: string, payload: ModelPayload, expiresIn: number) {
    const record = this.#keys.record(this.#model, id);
    const expiresAt = Math.round(systemClock() + expiresIn * 1000);
    const inserted = await this.#redis.runDurable([record], (client) => insertNewRecord.run(client, [record], [JSON.stringify(payload), expiresAt]));
    return Number(inserted) === 1;
  }

  async countUse(id: string, limit: number) {
    const record = this.#keys.record(this.#model, id);
    const uses = await this.#redis.runDurable([record], (client) => countRecordUse.run(client, [record], [limit]));
    return Number(uses);
  }

  /** Durable for the record: a lookup entry left behind by a lost removal names a record that is gone, and is skipped. */
  async destroy(id: string) {
    const record = this.#keys.record(this.#model, id);
    await this.#redis.runDurable([record], async (client) => {
      const taken = await takeRecord.run(client, [record], ['']);
      if (taken) await this.#removeLookups(client, id, taken as [string, number], true);
    });
  }

  /** Like destroy, as an undo (see release). */
  async discard(id: string) {
    const record = this.#keys.record(this.#model, id);
    await this.#redis.undo(async (client) => {
      const taken = await takeRecord.run(client, [record], ['']);
      if (taken) await this.#removeLookups(client, id, taken as [string, number], true);
    });
  }

  async revokeByGrantId(grantId: string) {
    const index = this.#keys.grant(this.#model, grantId);
    await this.#redis.runDurable([index], async (client, alsoWrote) => {
      const members = await liveGrantMembers.run(client, [index], []) as string[];
      if (!members.length) return;
      await Promise.all(members.map(async (id) => {
        // Only records still of this grant: an id re-stored under another grant keeps its record.
        const record = this.#keys.record(this.#model, id);
        const taken = await takeRecord.run(client, [record], [grantId]);
        alsoWrote([record]);
        if (taken) await this.#removeLookups(client, id, taken as [string, number], false);
      }));
      // The members read, not the whole key: a record added to the grant meanwhile stays indexed.
      await client.zrem(index, ...members);
    });
  }

  /**
   * The records kept without a lifetime, and every live client (LISTED_WHATEVER_THEIR_LIFETIME),
   * oldest first.
   */
  list() {
    return this.#redis.run(async (client) => {
      const index = this.#keys.list(this.#model);
      const ids = await client.zrange(index, 0, '-1');
      const payloads = await Promise.all(ids.map((id) => this.#read(client, id)));
      const gone = ids.filter((_, i) => payloads[i] === undefined);
      // Expired, or left behind by an upsert that failed after indexing; cleaned here, where it is noticed.
      if (gone.length) await client.zrem(index, ...gone);
      if (gone.length && LISTED_WHATEVER_THEIR_LIFETIME.has(this.#model)) await client.zrem(this.#keys.listExpiring(this.#model), ...gone);
      return ids.flatMap((id, i) => payloads[i] ? [{ id, payload: payloads[i] }] : []);
    });
  }

  listBy(value: string) {
    return this.#redis.run(async (client) => {
      await this.#listed.indexRecordsStoredBefore(client);
      const index = this.#keys.listedBy(this.#model, value);
      const ids = await liveGrantMembers.run(client, [index], []) as string[];
      const payloads = await Promise.all(ids.map((id) => this.#read(client, id)));
      // Left behind by an upsert that failed after indexing (or a record since stored under another value).
      const gone = ids.filter((_, i) => !payloads[i] || listedValue(this.#model, payloads[i]) !== value);
      if (gone.length) await client.zrem(index, ...gone);
      return ids.flatMap((id, i) => payloads[i] && !gone.includes(id) ? [{ id, payload: payloads[i] }] : []);
    });
  }

  async #read(client: RedisClient, id: string): Promise<ModelPayload | undefined> {
    const [payload, consumedAt] = await client.hmget(this.#keys.record(this.#model, id), 'p', 'c');
    if (payload === null || payload === undefined) return undefined;
    const parsed = JSON.parse(payload) as ModelPayload;
    return consumedAt ? { ...parsed, consumed: Number(consumedAt) } : parsed;
  }

  #findBy(key: string, field: 'uid' | 'userCode', value: string) {
    return this.#redis.run(async (client) => {
      const id = await client.get(key);
      if (id === null) return undefined;
      const found = await this.#read(client, id);
      // The entry may be stale: the record it named has since been stored with another value.
      return found?.[field] === value ? found : undefined;
    });
  }

  /** After a record is deleted: its uid and user-code entries, its places in list() and listBy() and (unless the caller clears it) its grant index. */
  async #removeLookups(client: RedisClient, id: string, [stored, ttl]: [string, number], removeFromGrantIndex: boolean): Promise<void> {
    const payload = JSON.parse(stored) as ModelPayload;
    const uid = nonEmpty(payload.uid);
    const userCode = nonEmpty(payload.userCode);
    const grantId = nonEmpty(payload.grantId);
    const listed = listedValue(this.#model, payload);
    const steps: Array<Promise<unknown>> = [];
    if (uid) steps.push(deleteLookup.run(client, [this.#keys.uid(this.#model, uid)], [id]));
    if (userCode) steps.push(deleteLookup.run(client, [this.#keys.userCode(this.#model, userCode)], [id]));
    if (grantId && removeFromGrantIndex) steps.push(client.zrem(this.#keys.grant(this.#model, grantId), id));
    if (ttl === -1 || LISTED_WHATEVER_THEIR_LIFETIME.has(this.#model)) steps.push(client.zrem(this.#keys.list(this.#model), id));
    if (LISTED_WHATEVER_THEIR_LIFETIME.has(this.#model)) steps.push(client.zrem(this.#keys.listExpiring(this.#model), id));
    if (listed) steps.push(client.zrem(this.#keys.listedBy(this.#model, listed), id));
    await Promise.all(steps);
  }
}

function setLookup(client: RedisClient, key: string, id: string, expiresAt: number | undefined): Promise<unknown> {
  return expiresAt === undefined ? client.set(key, id) : client.set(key, id, 'PXAT', expiresAt);
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
