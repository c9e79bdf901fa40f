import { resolve } from 'node:path';

import { openSqliteStore } from './sqlite.ts';
import type { Store } from './store.ts';

export type { Store } from './store.ts';

/** The storage URL schemes the service understands, for configuration validation and messages. */
export const STORE_SCHEMES = ['sqlite:', 'memory:'] as const;

/**
 * Opens the backend named by a storage URL:
 * `sqlite:<path>` (embedded default, file created if missing) or `memory:` (tests; gone on exit).
 */
export function openStore(url: string): Store {
  if (url === 'memory:') return openSqliteStore(':memory:', 'memory');
  const path = sqliteFile(url);
  if (path) return openSqliteStore(path);
  throw new TypeError(`unsupported storage URL "${url}"; use one of ${STORE_SCHEMES.join(', ')}`);
}

/** The absolute path of an embedded store's file (`sqlite:<path>`), or undefined for other URLs. */
export function sqliteFile(url: string): string | undefined {
  if (!url.startsWith('sqlite:')) return undefined;
  const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
  if (!path) throw new TypeError('sqlite: storage URL needs a file path, e.g. sqlite:./data/oauth.sqlite');
  return resolve(path);
}
