import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

import { nowSeconds } from '../../src/shared/clock.ts';
import { BackendUnavailableError, LISTED_BY, type ModelStore, type Store } from '../store.ts';
import { ACCOUNTS_SCHEMA, SqliteAccountStore } from './accounts.ts';
import { API_KEYS_SCHEMA, SqliteApiKeyStore, SWEEP_EXPIRED_API_KEYS } from './api_keys.ts';
import { SqliteConnection } from './connection.ts';
import { MODELS_SCHEMA, SqliteModelStore } from './models.ts';
import { memoryRateLimiters } from './rate_limits.ts';
import { RECORDS_SCHEMA, SqliteRecordStore } from './records.ts';
import { REVOCATIONS_SCHEMA, SqliteRevocationStore } from './revocations.ts';
import { SETTINGS_SCHEMA, SqliteSettingStore } from './settings.ts';

const PRAGMAS = `
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = ON;
PRAGMA busy_timeout = 5000;
`;

/** How often expired engine records are swept; reads already ignore them. */
const SWEEP_INTERVAL_MS = 60_000;

/** Opens (creating if needed) the SQLite database at `path`; `:memory:` gives a private in-process database. */
export function openSqliteStore(path: string, kind: 'sqlite' | 'memory' = 'sqlite'): Store {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path);
  db.exec(PRAGMAS + MODELS_SCHEMA + ACCOUNTS_SCHEMA + REVOCATIONS_SCHEMA + SETTINGS_SCHEMA + RECORDS_SCHEMA + API_KEYS_SCHEMA);
  addColumnIfMissing(db, 'oidc_models', 'uses', 'INTEGER NOT NULL DEFAULT 0');
  if (addColumnIfMissing(db, 'oidc_models', 'listed_by', 'TEXT')) listRecordsStoredBefore(db);
  db.exec('CREATE INDEX IF NOT EXISTS oidc_models_listed_by ON oidc_models (model, listed_by) WHERE listed_by IS NOT NULL');
  const connection = new SqliteConnection(db);

  const sweep = () => connection.write(() => {
    const at = nowSeconds();
    connection.statement('DELETE FROM oidc_models WHERE expires_at IS NOT NULL AND expires_at <= ?').run(at);
    connection.statement('DELETE FROM revocations WHERE expires_at <= ?').run(at);
    connection.statement(SWEEP_EXPIRED_API_KEYS).run(at);
  });
  const timer = setInterval(() => sweep().catch(() => undefined), SWEEP_INTERVAL_MS);
  timer.unref();

  const models = new Map<string, ModelStore>();
  let closed = false;

  return {
    kind,
    model(name) {
      let store = models.get(name);
      if (!store) {
        store = new SqliteModelStore(connection, name);
        models.set(name, store);
      }
      return store;
    },
    accounts: new SqliteAccountStore(connection),
    settings: new SqliteSettingStore(connection),
    revocations: new SqliteRevocationStore(connection),
    records: new SqliteRecordStore(connection),
    apiKeys: new SqliteApiKeyStore(connection),
    // In this process: with WORKERS above 1 each worker counts alone (a shared count needs Redis).
    rateLimiter: memoryRateLimiters(),
    committed: () => connection.committed(),
    async ping() {
      if (closed) throw new BackendUnavailableError('the SQLite store is closed');
      connection.read(() => connection.statement('SELECT 1').get());
    },
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      try {
        connection.flush();
      } finally {
        db.close();
      }
    },
  };
}

/**
 * A column added after databases were first created: those get it when opened (CREATE TABLE IF NOT
 * EXISTS leaves them as they are). True when this call added it.
 */
function addColumnIfMissing(db: DatabaseSync, table: string, column: string, definition: string): boolean {
  const columns = db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>;
  if (columns.some(({ name }) => name === column)) return false;
  try {
    db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
    return true;
  } catch (error) {
    // Another process opening the same file added it first.
    if (!/duplicate column name/i.test((error as Error).message)) throw error;
    return false;
  }
}

/** A database made before records were listed (LISTED_BY): its grants and clients are indexed once, as it is opened. */
function listRecordsStoredBefore(db: DatabaseSync): void {
  const update = db.prepare("UPDATE oidc_models SET listed_by = json_extract(payload, '$.' || ?) WHERE model = ? AND listed_by IS NULL");
  for (const [model, field] of Object.entries(LISTED_BY)) update.run(field, model);
}
