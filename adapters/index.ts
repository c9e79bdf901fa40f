import { resolve } from 'node:path';

import type { Logger } from '../src/shared/logger.ts';
import { openRedisStore } from './redis/store.ts';
import { isRedisUrl, parseRedisUrl, REDIS_SCHEMES, shownRedisUrl } from './redis/url.ts';
import { openSqliteStore } from './sqlite/store.ts';
import type { Store, StoreDurability } from './store.ts';

export type { Store } from './store.ts';

/** The storage URL schemes the service understands, for configuration validation and messages. */
export const STORE_SCHEMES = ['sqlite:', 'memory:', ...REDIS_SCHEMES] as const;

export interface OpenStoreOptions extends Partial<StoreDurability> {
  /** Redis only: starts every key (default `oauth:`), so several services or tests can share one Redis. */
  keyPrefix?: string;
  /** Hears of what the store works around: SQLite, database files or their directory left readable by other users; Redis, a sentinel it does not listen to. */
  warn?: Logger['warn'];
}

/**
 * Opens the backend named by a storage URL:
 * `sqlite:<path>` (embedded default, file created if missing), `memory:` (tests; gone on exit), or
 * Redis: `redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://` (adapters/redis/url.ts),
 * which connects in the background.
 */
export function openStore(url: string, options: OpenStoreOptions = {}): Store {
  if (url === 'memory:') return openSqliteStore(':memory:', { kind: 'memory' });
  if (isRedisUrl(url)) return openRedisStore(url, options);
  const path = sqliteFile(url);
  if (path) return openSqliteStore(path, { warn: options.warn, synchronous: options.sqliteSynchronous });
  throw new TypeError(`unsupported storage URL "${url}"; use one of ${STORE_SCHEMES.join(', ')}`);
}

/** The absolute path of an embedded store's file (`sqlite:<path>`), or undefined for other URLs. */
export function sqliteFile(url: string): string | undefined {
  if (!url.startsWith('sqlite:')) return undefined;
  const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
  if (!path) throw new TypeError('sqlite: storage URL needs a file path, e.g. sqlite:./data/oauth.sqlite');
  return resolve(path);
}

export interface StoreLocation {
  /** The storage URL as it may be shown: `sqlite:` with the absolute path, Redis without its credentials. */
  url: string;
  /** In words: "the SQLite store at /srv/oauth/data/oauth.sqlite". */
  description: string;
  /** Whether the storage URL holds credentials (left out of `url`). */
  credentials: boolean;
}

/** Where a storage URL keeps the data, to say to whoever runs a command against it; never its credentials. */
export function storeLocation(url: string): StoreLocation {
  if (url === 'memory:') return { url, description: 'an in-memory store (gone when the process ends)', credentials: false };
  if (isRedisUrl(url)) {
    const target = parseRedisUrl(url);
    const shown = shownRedisUrl(target);
    return { url: shown, description: `the Redis store at ${shown}`, credentials: target.username !== undefined || target.password !== undefined };
  }
  const path = sqliteFile(url);
  if (!path) throw new TypeError(`unsupported storage URL "${url}"; use one of ${STORE_SCHEMES.join(', ')}`);
  return { url: `sqlite:${path}`, description: `the SQLite store at ${path}`, credentials: false };
}
