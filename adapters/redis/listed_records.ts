import { Cluster } from 'ioredis';

import { systemClock } from '../../src/shared/clock.ts';
import type { RedisClient } from './connection.ts';
import type { RedisKeys } from './keys.ts';
import { addGrantMember } from './models.ts';
import { LISTED_BY, LISTED_BY_VERSION, listedValue, type ModelPayload } from '../store.ts';

/** How many keys one SCAN step looks at: enough that a large store takes few round trips, few enough that Redis is never held up. */
const SCAN_COUNT = 1000;

/**
 * A store written before a model was listed (LISTED_BY, at a LISTED_BY_VERSION below this one's)
 * holds records of it that are in no listBy index: sessions a password change must end, a
 * workspace's grant bindings and initial access tokens its deletion must find. They are indexed
 * once, before the first listBy, by scanning the model's records on every master, and the store
 * then says which version it is indexed for (keys.ts listedByVersion). Indexing a record twice
 * adds nothing, so a pass cut short is simply made again.
 */
export class ListedRecords {
  readonly #keys: RedisKeys;
  #indexed: Promise<void> | undefined;

  constructor(keys: RedisKeys) {
    this.#keys = keys;
  }

  indexRecordsStoredBefore(client: RedisClient): Promise<void> {
    this.#indexed ??= this.#indexOnce(client).catch((error: unknown) => {
      // Tried again by the next listBy: the failed one answers as its store call would.
      this.#indexed = undefined;
      throw error;
    });
    return this.#indexed;
  }

  async #indexOnce(client: RedisClient): Promise<void> {
    const version = Number(await client.get(this.#keys.listedByVersion()) ?? 0);
    if (version >= LISTED_BY_VERSION) return;
    const masters = client instanceof Cluster ? client.nodes('master') : [client];
    for (const model of Object.keys(LISTED_BY)) {
      for (const node of masters) await this.#indexModel(client, node, model);
    }
    await client.set(this.#keys.listedByVersion(), String(LISTED_BY_VERSION));
  }

  async #indexModel(client: RedisClient, node: RedisClient, model: string): Promise<void> {
    const prefix = this.#keys.record(model, '');
    let cursor = '0';
    do {
      const [next, recordKeys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', SCAN_COUNT);
      cursor = next;
      await Promise.all(recordKeys.map(async (recordKey) => {
        const [stored, ttl] = await Promise.all([client.hget(recordKey, 'p'), client.pttl(recordKey)]);
        if (stored === null || ttl === -2) return;
        const listed = listedValue(model, JSON.parse(stored) as ModelPayload);
        if (listed === undefined) return;
        const expiresAt = ttl === -1 ? '+inf' : systemClock() + ttl;
        await addGrantMember.run(client, [this.#keys.listedBy(model, listed)], [recordKey.slice(prefix.length), expiresAt]);
      }));
    } while (cursor !== '0');
  }
}
