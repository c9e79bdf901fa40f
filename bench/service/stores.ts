import { join } from 'node:path';

import { startRedis, untilSynchronised } from '../../test/support/redis.ts';

/**
 * Which storage the service runs on during a bench, and what that means for starting and seeding it.
 * A store the harness can open from outside (a file, a Redis) is seeded the way the tests do it,
 * while the service runs; a memory store exists only inside the service's process, so a preload
 * seeds it in there (bench/service/memory_preload.ts). `redis` starts a redis-server of the bench's own
 * with the persistence a production deployment would use (AOF, fsync every second).
 *
 * `durable` (the `service_durable` side, `--durable`): what makes an acknowledged write survive the
 * worst the backend can meet, at its cost: SQLite with SQLITE_SYNCHRONOUS=full (an fsync per commit,
 * for power loss), Redis with a replica beside it and REDIS_WAIT_REPLICAS=1 (a WAIT per write, for a
 * failover). A memory store has neither.
 */

export const STORE_KINDS = ['sqlite', 'memory', 'redis'] as const;
export type StoreKind = typeof STORE_KINDS[number];

export interface StorePlan {
  readonly kind: StoreKind;
  /** The STORE value the service (and the admin CLI) is given. */
  readonly url: string;
  /** Node's arguments: always src/main.ts, the service as it ships; a memory store adds a preload that seeds it. */
  readonly nodeArgs: readonly string[];
  /** The harness seeds the user with openStore + Accounts and the initial access token with the admin CLI. */
  readonly seededFromOutside: boolean;
  /** More environment for the service and the admin CLI. */
  readonly env: Record<string, string>;
  /** Stops what the plan started (a redis-server). */
  stop(): Promise<void>;
}

const nothingToStop = async () => undefined;
/**
 * A fixed key-encryption key (a bench's data is thrown away): SQLite's default would be made under
 * the home directory, and the other stores get none by default from outside.
 */
const BENCH_KEY_ENCRYPTION_KEY = Buffer.alloc(32, 11).toString('base64url');

/** The stores `durable` applies to. */
export function hasDurableVariant(kind: StoreKind): boolean {
  return kind !== 'memory';
}

export async function storePlan(kind: StoreKind, tempDir: string, durable = false): Promise<StorePlan> {
  if (durable && !hasDurableVariant(kind)) throw new TypeError(`the ${kind} store has no durable variant`);
  switch (kind) {
    case 'sqlite': {
      const env = { KEY_ENCRYPTION_KEY: BENCH_KEY_ENCRYPTION_KEY, ...(durable ? { SQLITE_SYNCHRONOUS: 'full' } : {}) };
      return { kind, url: `sqlite:${join(tempDir, 'oauth.sqlite')}`, nodeArgs: ['src/main.ts'], seededFromOutside: true, env, stop: nothingToStop };
    }
    case 'memory':
      // One key for the service and the admin CLI the preload runs in its process: left unset, each
      // would make its own for `memory:`, and the CLI could not open the keys the service sealed.
      return { kind, url: 'memory:', nodeArgs: ['--import', './bench/service/memory_preload.ts', 'src/main.ts'], seededFromOutside: false, env: { KEY_ENCRYPTION_KEY: BENCH_KEY_ENCRYPTION_KEY }, stop: nothingToStop };
    case 'redis': {
      const redis = await startRedis(['--appendonly', 'yes', '--appendfsync', 'everysec']);
      const replica = durable ? await startRedis(['--replicaof', '127.0.0.1', String(redis.port)]) : undefined;
      if (replica) await untilSynchronised(replica);
      const env = { KEY_ENCRYPTION_KEY: BENCH_KEY_ENCRYPTION_KEY, ...(durable ? { REDIS_WAIT_REPLICAS: '1' } : {}) };
      const stop = async () => {
        await replica?.stop();
        await redis.stop();
      };
      return { kind, url: redis.url, nodeArgs: ['src/main.ts'], seededFromOutside: true, env, stop };
    }
  }
}

export function isStoreKind(value: string): value is StoreKind {
  return (STORE_KINDS as readonly string[]).includes(value);
}
