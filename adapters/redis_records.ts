import type { RedisConnection } from './redis_connection.ts';
import type { RedisKeys } from './redis_keys.ts';
import { createRecord, deleteRecord, updateRecord } from './redis_record_scripts.ts';
import { DuplicateError, withoutNulls, type DataRecord, type RecordPage, type RecordStore } from './store.ts';

/** Hash fields of a record that hold its values: a prefix of their own, so no field name can be taken for the metadata. */
const VALUE = 'v:';

/**
 * Data records, each a hash under its workspace's `{data:<id>}` tag, listed in a sorted set per
 * object by position (key layout: redis_keys.ts). Kept without a TTL.
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
    const position = await this.#redis.run((client) => createRecord.run(client, this.#recordKeys(workspaceId, object, record.id),
      [record.id, record.createdAt, record.updatedAt, ...fields]));
    if (position === null) throw new DuplicateError(`a record ${record.id} of ${object} already exists`);
    return { id: record.id, position: Number(position), createdAt: record.createdAt, updatedAt: record.updatedAt, values };
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
    const flat = await this.#redis.run((client) => updateRecord.run(client, [this.#keys.dataRecord(workspaceId, object, id)], args)) as string[] | null;
    return flat === null ? undefined : toRecord(id, pairs(flat));
  }

  async delete(workspaceId: string, object: string, id: string) {
    const deleted = await this.#redis.run((client) => deleteRecord.run(client, this.#recordKeys(workspaceId, object, id), [id]));
    return deleted === 1;
  }

  /** KEYS of createRecord and deleteRecord: record, order, position. */
  #recordKeys(workspaceId: string, object: string, id: string): string[] {
    return [this.#keys.dataRecord(workspaceId, object, id), this.#keys.dataOrder(workspaceId, object), this.#keys.dataPosition(workspaceId, object)];
  }
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
