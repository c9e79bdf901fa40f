import type { RedisConnection } from './redis_connection.ts';
import type { RedisKeys } from './redis_keys.ts';
import { addRevocation, revocationsSince } from './redis_scripts.ts';
import type { RevocationEntry, RevocationStore } from './store.ts';

/** The revocation list under the `{revocations}` hash tag; the scripts in redis_scripts.ts describe its keys. */
export class RedisRevocationStore implements RevocationStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async add(entry: RevocationEntry) {
    await this.#redis.run((client) => addRevocation.run(client, this.#keys.revocations(),
      [entry.key, entry.owner ?? '', entry.issuedBefore, entry.expiresAt]));
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
