import { chmodSync, closeSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

import { nowSeconds } from '../../src/shared/clock.ts';
import { makeDirectories } from '../../src/shared/directories.ts';
import type { Logger } from '../../src/shared/logger.ts';
import { BackendUnavailableError, StoreOpenError, type ModelStore, type SqliteSynchronous, type Store } from '../store.ts';
import { ACCOUNTS_SCHEMA, SqliteAccountStore } from './accounts.ts';
import { API_KEYS_SCHEMA, SqliteApiKeyStore, SWEEP_EXPIRED_API_KEYS } from './api_keys.ts';
import { BUSY_WAIT_ON, SqliteConnection } from './connection.ts';
import { listRecordsStoredBefore } from './listed_records.ts';
import { MODELS_SCHEMA, SqliteModelStore } from './models.ts';
import { memoryRateLimiters } from './rate_limits.ts';
import { RECORDS_INDEX, RECORDS_SCHEMA, SqliteRecordStore, SWEEP_EXPIRED_RECORD_CREATES } from './records.ts';
import { REVOCATIONS_SCHEMA, SqliteRevocationStore } from './revocations.ts';
import { SETTINGS_SCHEMA, SqliteSettingStore } from './settings.ts';

/**
 * WAL, with `synchronous` NORMAL (the default) or FULL. In WAL mode a commit is appended to the
 * `-wal` file before COMMIT returns, so it survives the process being killed either way; NORMAL
 * leaves flushing that file to the disk to the OS (and fsyncs it at checkpoints), so a power loss
 * or an OS crash may take the last commits with it, while FULL fsyncs the WAL at every commit.
 *
 * `secure_delete` FAST zeroes what a delete or an update frees within the pages it writes anyway
 * (no extra I/O); the deletions of what people asked to be erased zero the whole pages they free
 * too (SqliteConnection.erase).
 */
const pragmas = (synchronous: SqliteSynchronous) => `
PRAGMA journal_mode = WAL;
PRAGMA synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'};
PRAGMA secure_delete = FAST;
PRAGMA foreign_keys = ON;
${BUSY_WAIT_ON};
`;

/** How often expired engine records, revocation entries, API keys and keyed creates are swept; reads already ignore them. */
const SWEEP_INTERVAL_MS = 60_000;

/**
 * The database holds hashed credentials and sealed keys, and its `-wal` recent writes in full:
 * nothing another user of the machine should read. Owner-only, whatever the umask.
 */
const FILE_MODE = 0o600;
const DIRECTORY_MODE = 0o700;
const OTHERS = 0o077;

export interface SqliteStoreOptions {
  /** `memory` for a private in-process database (`:memory:`). Default `sqlite`. */
  kind?: 'sqlite' | 'memory';
  /** Hears of files that were readable by other users (see ownerOnly). */
  warn?: Logger['warn'];
  /** Default `normal`. */
  synchronous?: SqliteSynchronous;
}

/** Opens (creating if needed) the SQLite database at `path`; `:memory:` gives a private in-process database. */
export function openSqliteStore(path: string, { kind = 'sqlite', warn, synchronous = 'normal' }: SqliteStoreOptions = {}): Store {
  const db = openDatabase(path, warn, synchronous);
  const connection = new SqliteConnection(db);

  const sweep = () => connection.write(() => {
    const at = nowSeconds();
    connection.statement('DELETE FROM oidc_models WHERE expires_at IS NOT NULL AND expires_at <= ?').run(at);
    connection.statement('DELETE FROM revocations WHERE expires_at <= ?').run(at);
    connection.statement(SWEEP_EXPIRED_API_KEYS).run(at);
    connection.statement(SWEEP_EXPIRED_RECORD_CREATES).run(at);
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
 * The database at `path`, its schema brought up to date. A file that cannot be created or opened,
 * or is not a database, is a StoreOpenError: unlike a busy or full disk later, retrying would
 * not help.
 */
function openDatabase(path: string, warn: Logger['warn'] | undefined, synchronous: SqliteSynchronous): DatabaseSync {
  let db: DatabaseSync | undefined;
  try {
    if (path !== ':memory:') ownerOnly(path, warn);
    db = new DatabaseSync(path);
    db.exec(pragmas(synchronous) + MODELS_SCHEMA + ACCOUNTS_SCHEMA + REVOCATIONS_SCHEMA + SETTINGS_SCHEMA + RECORDS_SCHEMA + API_KEYS_SCHEMA);
    // Only once SQLite has taken the file for a database: a file that is none is not the service's to change.
    if (path !== ':memory:') filesOwnerOnly(path, warn);
    addColumnIfMissing(db, 'oidc_models', 'uses', 'INTEGER NOT NULL DEFAULT 0');
    addColumnIfMissing(db, 'oidc_models', 'listed_by', 'TEXT');
    addColumnIfMissing(db, 'oidc_models', 'claim', 'TEXT');
    addColumnIfMissing(db, 'oidc_models', 'completed_by', 'TEXT');
    positionRecordsStoredBefore(db);
    db.exec(RECORDS_INDEX);
    listRecordsStoredBefore(db);
    db.exec('CREATE INDEX IF NOT EXISTS oidc_models_listed_by ON oidc_models (model, listed_by) WHERE listed_by IS NOT NULL');
    return db;
  } catch (error) {
    if (db?.isOpen) db.close();
    // Another process holding the file a while (a worker creating the schema) is no fault of the path's.
    if (/database (table )?is locked/i.test((error as Error).message)) throw error;
    throw new StoreOpenError(`the SQLite database ${path} cannot be opened: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Creates the directory (0700) and the database file (0600) before SQLite opens it: SQLite gives
 * the `-wal` and `-shm` files it creates the database file's mode. An existing directory is left
 * as it is, with a warning when others may list it: it may be shared (the working directory, with
 * `sqlite:./oauth.sqlite`), and the files' own modes already keep their content private.
 */
function ownerOnly(path: string, warn: Logger['warn'] | undefined): void {
  const directory = dirname(path);
  if (makeDirectories(directory, DIRECTORY_MODE) === undefined && (statSync(directory).mode & OTHERS) !== 0) {
    warn?.('the database\'s directory can be listed by other users; make it owner-only (chmod 700)', { directory });
  }
  try {
    // Only a new file is opened here: closing a descriptor of a database this process has open
    // would drop SQLite's POSIX locks on it.
    closeSync(openSync(path, 'wx', FILE_MODE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/**
 * Database files an earlier version left readable by others are made owner-only (they are the
 * service's own, and nothing but the service and its operator need them), and said so.
 */
function filesOwnerOnly(path: string, warn: Logger['warn'] | undefined): void {
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    let mode: number;
    try {
      const found = statSync(file);
      // Not a file (STORE names a directory): SQLite refuses to open it, and its mode is not this service's to change.
      if (!found.isFile()) continue;
      mode = found.mode & 0o777;
    } catch {
      continue; // no -wal or -shm yet: SQLite makes them with the database file's mode
    }
    if ((mode & OTHERS) === 0) continue;
    try {
      chmodSync(file, mode & ~OTHERS);
      warn?.('made a database file owner-only: it was readable by other users', { file, was: mode.toString(8) });
    } catch (error) {
      warn?.('a database file is readable by other users and could not be made owner-only (chmod 600)', { file, error: (error as Error).message });
    }
  }
}

function hasColumn(db: DatabaseSync, table: string, column: string): boolean {
  const columns = db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>;
  return columns.some(({ name }) => name === column);
}

/**
 * A column added after databases were first created: those get it when opened (CREATE TABLE IF NOT
 * EXISTS leaves them as they are). True when this call added it.
 */
function addColumnIfMissing(db: DatabaseSync, table: string, column: string, definition: string): boolean {
  if (hasColumn(db, table, column)) return false;
  try {
    db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
    return true;
  } catch (error) {
    // Another process opening the same file added it first.
    if (!/duplicate column name/i.test((error as Error).message)) throw error;
    return false;
  }
}

/**
 * A database made before records had a position of their own: each keeps its seq as its position.
 * One transaction, so that no other process opening the file sees the column without the values;
 * taken only when the column is missing, so that opening a database made since needs no write lock.
 */
function positionRecordsStoredBefore(db: DatabaseSync): void {
  if (hasColumn(db, 'records', 'position')) return;
  db.exec('BEGIN IMMEDIATE');
  try {
    if (addColumnIfMissing(db, 'records', 'position', 'INTEGER')) db.exec('UPDATE records SET position = seq');
    db.exec('COMMIT');
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
}

