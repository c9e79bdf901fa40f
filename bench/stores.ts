import { join } from 'node:path';

/**
 * Which storage the service runs on during a bench, and what that means for starting and seeding it.
 * A store the harness can open from outside (a file; later a Redis URL) is seeded the way the tests
 * do it, while the service runs; a memory store exists only inside the service's process, so a
 * preload seeds it in there (bench/memory_preload.ts).
 */

export const STORE_KINDS = ['sqlite', 'memory'] as const;
// Adding 'redis': a `redis://` URL from an option, nodeArgs ['src/main.ts'], seededFromOutside true,
// and a flush of the bench's keys on clean-up.
export type StoreKind = typeof STORE_KINDS[number];

export interface StorePlan {
  readonly kind: StoreKind;
  /** The STORE value the service (and the admin CLI) is given. */
  readonly url: string;
  /** Node's arguments: always src/main.ts, the service as it ships; a memory store adds a preload that seeds it. */
  readonly nodeArgs: readonly string[];
  /** The harness seeds the user with openStore + Accounts and the initial access token with the admin CLI. */
  readonly seededFromOutside: boolean;
}

export function storePlan(kind: StoreKind, tempDir: string): StorePlan {
  switch (kind) {
    case 'sqlite':
      return { kind, url: `sqlite:${join(tempDir, 'oauth.sqlite')}`, nodeArgs: ['src/main.ts'], seededFromOutside: true };
    case 'memory':
      return { kind, url: 'memory:', nodeArgs: ['--import', './bench/memory_preload.ts', 'src/main.ts'], seededFromOutside: false };
  }
}

export function isStoreKind(value: string): value is StoreKind {
  return (STORE_KINDS as readonly string[]).includes(value);
}
