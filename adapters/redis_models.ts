import type { RedisClient, RedisConnection } from './redis_connection.ts';
import type { RedisKeys } from './redis_keys.ts';
import { addGrantMember, consumeRecord, countRecordUse, deleteLookup, liveGrantMembers, takeRecord, upsertRecord } from './redis_scripts.ts';
import { listedValue, type ModelPayload, type ModelStore } from './store.ts';

/**
 * One engine model in Redis (key layout: redis_keys.ts). Every record and lookup entry expires
 * with the record's lifetime; records without one (clients) are also listed in an index for list(),
 * and grants and clients in an index by the value they are listed by (LISTED_BY) for listBy().
 */
export class RedisModelStore implements ModelStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;
  readonly #model: string;

  constructor(redis: RedisConnection, keys: RedisKeys, model: string) {
    this.#redis = redis;
    this.#keys = keys;
    this.#model = model;
  }

  async upsert(id: string, payload: ModelPayload, expiresIn: number | undefined) {
    // One absolute expiry for the record and its lookup entries, so none outlives the others.
    const expiresAt = expiresIn ? Math.round(Date.now() + expiresIn * 1000) : undefined;
    const grantId = nonEmpty(payload.grantId);
    const uid = nonEmpty(payload.uid);
    const userCode = nonEmpty(payload.userCode);
    const listed = listedValue(this.#model, payload);
    const record = JSON.stringify(payload);
    await this.#redis.run(async (client) => {
      // Lookup entries before the record: one whose record is missing is skipped when read, while
      // a record missing from its grant's index would survive revokeByGrantId.
      const lookups: Array<Promise<unknown>> = [];
      if (grantId) lookups.push(addGrantMember.run(client, [this.#keys.grant(this.#model, grantId)], [id, expiresAt ?? '+inf']));
      if (uid) lookups.push(setLookup(client, this.#keys.uid(this.#model, uid), id, expiresAt));
      if (userCode) lookups.push(setLookup(client, this.#keys.userCode(this.#model, userCode), id, expiresAt));
      if (expiresAt === undefined) lookups.push(client.zadd(this.#keys.list(this.#model), 'NX', Date.now(), id));
      // Scored by expiry, like a grant's index: the entry goes with the record, the key with its last member.
      if (listed) lookups.push(addGrantMember.run(client, [this.#keys.listedBy(this.#model, listed)], [id, expiresAt ?? '+inf']));
      await Promise.all(lookups);
      const previousTtl = await upsertRecord.run(client, [this.#keys.record(this.#model, id)], [record, expiresAt ?? '', grantId ?? '']);
      // Kept without a lifetime before, with one now: no longer one of the records list() shows.
      if (expiresAt !== undefined && previousTtl === -1) await client.zrem(this.#keys.list(this.#model), id);
    });
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

  async consume(id: string) {
    const consumed = await this.#redis.run((client) => consumeRecord.run(client, [this.#keys.record(this.#model, id)], [Math.floor(Date.now() / 1000)]));
    return consumed === 1;
  }

  async countUse(id: string, limit: number) {
    const uses = await this.#redis.run((client) => countRecordUse.run(client, [this.#keys.record(this.#model, id)], [limit]));
    return Number(uses);
  }

  async destroy(id: string) {
    await this.#redis.run(async (client) => {
      const taken = await takeRecord.run(client, [this.#keys.record(this.#model, id)], ['']);
      if (taken) await this.#removeLookups(client, id, taken as [string, number], true);
    });
  }

  async revokeByGrantId(grantId: string) {
    await this.#redis.run(async (client) => {
      const index = this.#keys.grant(this.#model, grantId);
      const members = await liveGrantMembers.run(client, [index], []) as string[];
      if (!members.length) return;
      await Promise.all(members.map(async (id) => {
        // Only records still of this grant: an id re-stored under another grant keeps its record.
        const taken = await takeRecord.run(client, [this.#keys.record(this.#model, id)], [grantId]);
        if (taken) await this.#removeLookups(client, id, taken as [string, number], false);
      }));
      // The members read, not the whole key: a record added to the grant meanwhile stays indexed.
      await client.zrem(index, ...members);
    });
  }

  /**
   * The records kept without a lifetime (clients: what the admin CLI lists), oldest first. Records
   * with a lifetime are not indexed for listing: that would be one more write per token to one
   * key shared by every instance, for a list nobody asks for.
   */
  list() {
    return this.#redis.run(async (client) => {
      const index = this.#keys.list(this.#model);
      const ids = await client.zrange(index, 0, '-1');
      const payloads = await Promise.all(ids.map((id) => this.#read(client, id)));
      const gone = ids.filter((_, i) => payloads[i] === undefined);
      // Left behind by an upsert that failed after indexing; cleaned here, where it is noticed.
      if (gone.length) await client.zrem(index, ...gone);
      return ids.flatMap((id, i) => payloads[i] ? [{ id, payload: payloads[i] }] : []);
    });
  }

  listBy(value: string) {
    return this.#redis.run(async (client) => {
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
    if (ttl === -1) steps.push(client.zrem(this.#keys.list(this.#model), id));
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
