import { NOW_MS, type RedisConnection, Script } from './connection.ts';
import type { RedisKeys } from './keys.ts';
import { DuplicateError, withoutNulls, type DataRecord, type EarlierCreate, type KeyedCreate, type RecordPage, type RecordStore } from '../store.ts';

/**
 * Lua that makes a record at its list's next position, leaving it in `now` and `position`.
 * KEYS: record, order, position. ARGV: id, createdAt, updatedAt, then (from ARGV[fieldsFrom]) hash
 * field / value JSON pairs.
 *
 * A position is max(last + 1, now in ms), as revocation positions are: it grows also after the
 * position key is gone with the object's last record (deleteRecord), so no position is reused.
 * SET also clears the TTL deleteRecord may have given the position key.
 */
const insertRecord = (fieldsFrom: number) => `
${NOW_MS}
local position = string.format('%d', math.max(tonumber(redis.call('GET', KEYS[3]) or '0') + 1, tonumber(now)))
redis.call('SET', KEYS[3], position)
redis.call('HSET', KEYS[1], '$p', position, '$c', ARGV[2], '$u', ARGV[3], unpack(ARGV, ${fieldsFrom}))
redis.call('ZADD', KEYS[2], position, ARGV[1])
`;

/**
 * Creates a record unless its id is taken. KEYS: record, order, position. ARGV: id, createdAt,
 * updatedAt, then hash field / value JSON pairs. Returns the position, or nil when the id is taken.
 */
const createRecord = new Script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
${insertRecord(4)}
return position
`);

/**
 * createRecord under an idempotency key, kept in the same step. KEYS: record, order, position,
 * create, creates. ARGV: id, createdAt, updatedAt, the create's JSON, how long it is kept in ms,
 * then hash field / value JSON pairs. Returns the position; {'earlier', the earlier create's JSON}
 * when the key is kept; nil when the id is taken. The creates set loses what has expired each time.
 */
const createRecordOnce = new Script(`
local earlier = redis.call('GET', KEYS[4])
if earlier then return {'earlier', earlier} end
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
${insertRecord(6)}
local expires = string.format('%d', tonumber(now) + tonumber(ARGV[5]))
redis.call('SET', KEYS[4], ARGV[4], 'PXAT', expires)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
redis.call('ZADD', KEYS[5], expires, KEYS[4])
redis.call('PEXPIREAT', KEYS[5], expires)
return position
`);

/**
 * Merges changes into a record that exists (never recreating a deleted one): fields set and
 * cleared in one step, so concurrent updates of different fields both stay. KEYS: record.
 * ARGV: updatedAt, n, then n field / value JSON pairs to set, then the fields to clear.
 * Returns the record's fields and values after the merge (HGETALL), or nil when there is no record.
 */
const updateRecord = new Script(`
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
const deleteRecord = new Script(`
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then
  local last = redis.call('GET', KEYS[3])
  if last then redis.call('PEXPIREAT', KEYS[3], string.format('%d', tonumber(last) + 1)) end
end
return 1
`);

/**
 * Deletes records of one object, as deleteRecord does each. KEYS: order, position, then the
 * records. ARGV: the records' ids. Returns how many there were.
 */
const deleteRecords = new Script(`
local deleted = 0
for i = 1, #ARGV do
  deleted = deleted + redis.call('DEL', KEYS[2 + i])
  redis.call('ZREM', KEYS[1], ARGV[i])
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  local last = redis.call('GET', KEYS[2])
  if last then redis.call('PEXPIREAT', KEYS[2], string.format('%d', tonumber(last) + 1)) end
end
return deleted
`);

/** How many records deleteAll deletes in one step: each step holds Redis for its length. */
const DELETE_BATCH = 100;

/** Hash fields of a record that hold its values: a prefix of their own, so no field name can be taken for the metadata. */
const VALUE = 'v:';

/**
 * Data records, each a hash under its workspace's `{data:<id>}` tag, listed in a sorted set per
 * object by position (key layout: keys.ts). Kept without a TTL; a keyed create is kept for its time.
 */
export class RedisRecordStore implements RecordStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async create(workspaceId: string, object: string, record: Omit<DataRecord, 'position'>) {
    const values = withoutNulls(record.values);
    const fields = Object.entries(values).flatMap(([name, value]) => [VALUE + name, JSON.stringify(value)]);
    const keys = this.#recordKeys(workspaceId, object, record.id);
    const position = await this.#redis.runDurable(keys, (client) => createRecord.run(client, keys, [record.id, record.createdAt, record.updatedAt, ...fields]));
    if (position === null) throw new DuplicateError(`a record ${record.id} of ${object} already exists`);
    return { id: record.id, position: Number(position), createdAt: record.createdAt, updatedAt: record.updatedAt, values };
  }

  async createOnce(workspaceId: string, object: string, record: Omit<DataRecord, 'position'>, keyed: KeyedCreate) {
    const values = withoutNulls(record.values);
    const fields = Object.entries(values).flatMap(([name, value]) => [VALUE + name, JSON.stringify(value)]);
    const keys = [...this.#recordKeys(workspaceId, object, record.id), this.#keys.dataCreate(workspaceId, keyed.key), this.#keys.dataCreates(workspaceId, object)];
    const kept: StoredCreate = { f: keyed.fingerprint, o: object, id: record.id };
    const args = [record.id, record.createdAt, record.updatedAt, JSON.stringify(kept), String(Math.ceil(keyed.keptFor * 1000)), ...fields];
    const reply = await this.#redis.runDurable(keys, (client) => createRecordOnce.run(client, keys, args)) as string | [string, string] | null;
    if (reply === null) throw new DuplicateError(`a record ${record.id} of ${object} already exists`);
    if (Array.isArray(reply)) return { earlier: earlierCreate(reply[1]) };
    return { created: { id: record.id, position: Number(reply), createdAt: record.createdAt, updatedAt: record.updatedAt, values } };
  }

  earlierCreate(workspaceId: string, key: string) {
    return this.#redis.run(async (client) => {
      const stored = await client.get(this.#keys.dataCreate(workspaceId, key));
      return stored === null ? undefined : earlierCreate(stored);
    });
  }

  get(workspaceId: string, object: string, id: string) {
    return this.#redis.run(async (client) => toRecord(id, await client.hgetall(this.#keys.dataRecord(workspaceId, object, id))));
  }

  existing(workspaceId: string, object: string, ids: string[]) {
    return this.#redis.run(async (client) => {
      // Sent together, without waiting for each reply: one round trip.
      const found = await Promise.all(ids.map((id) => client.exists(this.#keys.dataRecord(workspaceId, object, id))));
      return new Set(ids.filter((_, i) => found[i] === 1));
    });
  }

  list(workspaceId: string, object: string, after: number, limit: number): Promise<RecordPage> {
    return this.#redis.run(async (client) => {
      const order = this.#keys.dataOrder(workspaceId, object);
      // One transaction, so the page and the total are of the same moment.
      const replies = await client.multi()
        .zrangebyscore(order, `(${after}`, '+inf', 'LIMIT', 0, limit + 1)
        .zcard(order)
        .exec();
      const [ids, total] = transactionResults(replies) as [string[], number];
      const page = ids.slice(0, limit);
      const stored = await Promise.all(page.map((id) => client.hgetall(this.#keys.dataRecord(workspaceId, object, id))));
      // A record deleted since the ids were read is left out of the page.
      const records = page.flatMap((id, i) => toRecord(id, stored[i]!) ?? []);
      return { records, total, hasMore: ids.length > limit };
    });
  }

  async update(workspaceId: string, object: string, id: string, changes: Record<string, unknown>, updatedAt: string) {
    // As in a JSON merge patch: null clears a field, undefined leaves it as it is.
    const set = Object.entries(changes).filter(([, value]) => value !== null && value !== undefined);
    const cleared = Object.entries(changes).filter(([, value]) => value === null).map(([name]) => VALUE + name);
    const args = [updatedAt, set.length, ...set.flatMap(([name, value]) => [VALUE + name, JSON.stringify(value)]), ...cleared];
    const key = this.#keys.dataRecord(workspaceId, object, id);
    const flat = await this.#redis.runDurable([key], (client) => updateRecord.run(client, [key], args)) as string[] | null;
    return flat === null ? undefined : toRecord(id, pairs(flat));
  }

  async delete(workspaceId: string, object: string, id: string) {
    const keys = this.#recordKeys(workspaceId, object, id);
    const deleted = await this.#redis.runDurable(keys, (client) => deleteRecord.run(client, keys, [id]));
    return deleted === 1;
  }

  async deleteAll(workspaceId: string, object: string) {
    const order = this.#keys.dataOrder(workspaceId, object);
    const position = this.#keys.dataPosition(workspaceId, object);
    let deleted = 0;
    for (;;) {
      const batch = await this.#redis.runDurable([order], async (client) => {
        const ids = await client.zrange(order, 0, String(DELETE_BATCH - 1));
        if (!ids.length) return undefined;
        return Number(await deleteRecords.run(client, [order, position, ...ids.map((id) => this.#keys.dataRecord(workspaceId, object, id))], ids));
      });
      if (batch === undefined) break;
      deleted += batch;
    }
    await this.#forgetCreates(workspaceId, object);
    return deleted;
  }

  /** Deletes the keyed creates of one object in the workspace, a batch at a time. */
  async #forgetCreates(workspaceId: string, object: string): Promise<void> {
    const creates = this.#keys.dataCreates(workspaceId, object);
    for (;;) {
      const done = await this.#redis.runDurable([creates], async (client) => {
        const batch = await client.zrange(creates, 0, String(DELETE_BATCH - 1));
        if (!batch.length) return true;
        transactionResults(await client.multi().del(...batch).zrem(creates, ...batch).exec());
        return false;
      });
      if (done) return;
    }
  }

  /** KEYS of createRecord and deleteRecord: record, order, position. */
  #recordKeys(workspaceId: string, object: string, id: string): string[] {
    return [this.#keys.dataRecord(workspaceId, object, id), this.#keys.dataOrder(workspaceId, object), this.#keys.dataPosition(workspaceId, object)];
  }
}

/** A keyed create as dataCreate holds it. */
interface StoredCreate {
  f: string;
  o: string;
  id: string;
}

function earlierCreate(stored: string): EarlierCreate {
  const { f, o, id } = JSON.parse(stored) as StoredCreate;
  return { fingerprint: f, object: o, id };
}

/** A record from its hash (HGETALL: empty when there is no such record). */
function toRecord(id: string, hash: Record<string, string>): DataRecord | undefined {
  if (hash.$p === undefined) return undefined;
  const values = Object.fromEntries(Object.entries(hash)
    .filter(([field]) => field.startsWith(VALUE))
    .map(([field, json]) => [field.slice(VALUE.length), JSON.parse(json) as unknown]));
  return { id, position: Number(hash.$p), createdAt: hash.$c!, updatedAt: hash.$u!, values };
}

/** A flat [field, value, field, value...] reply as an object. */
function pairs(flat: string[]): Record<string, string> {
  return Object.fromEntries(Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i]!, flat[2 * i + 1]!]));
}

/** The replies of a MULTI ... EXEC, or the first error among them. */
function transactionResults(replies: Array<[Error | null, unknown]> | null): unknown[] {
  // EXEC answers nil only when a WATCHed key changed, and nothing is watched here.
  if (replies === null) throw new Error('Redis aborted a transaction that watches nothing');
  return replies.map(([error, reply]) => {
    if (error) throw error;
    return reply;
  });
}
