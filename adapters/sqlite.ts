import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

import { memoryRateLimiters } from './rate_limiters.ts';
import { API_KEYS_SCHEMA, SqliteApiKeyStore, SWEEP_EXPIRED_API_KEYS } from './sqlite_api_keys.ts';
import { isUniqueViolation, SqliteConnection } from './sqlite_connection.ts';
import { RECORDS_SCHEMA, SqliteRecordStore } from './sqlite_records.ts';

import {
  BackendUnavailableError,
  DuplicateError,
  LISTED_BY,
  listedValue,
  type AccountStore,
  type Membership,
  type ModelPayload,
  type ModelStore,
  type RevocationEntry,
  type RevocationStore,
  type Role,
  type SettingStore,
  type Store,
  type User,
  type Workspace,
} from './store.ts';

const SCHEMA = `
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = ON;
PRAGMA busy_timeout = 5000;

CREATE TABLE IF NOT EXISTS oidc_models (
  model TEXT NOT NULL,
  id TEXT NOT NULL,
  payload TEXT NOT NULL,
  grant_id TEXT,
  uid TEXT,
  user_code TEXT,
  consumed_at INTEGER,
  expires_at INTEGER,
  uses INTEGER NOT NULL DEFAULT 0,
  listed_by TEXT,
  PRIMARY KEY (model, id)
);
CREATE INDEX IF NOT EXISTS oidc_models_grant ON oidc_models (grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_models_uid ON oidc_models (model, uid) WHERE uid IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_models_user_code ON oidc_models (model, user_code) WHERE user_code IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_models_expiry ON oidc_models (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS workspaces (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE COLLATE NOCASE,
  name TEXT NOT NULL,
  given_name TEXT,
  family_name TEXT,
  password_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS memberships (
  user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
  PRIMARY KEY (user_id, workspace_id)
);
CREATE TABLE IF NOT EXISTS revocations (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL UNIQUE,
  owner TEXT,
  issued_before INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS revocations_expiry ON revocations (expires_at);
CREATE TABLE IF NOT EXISTS settings (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
`;

/** How often expired engine records are swept; reads already ignore them. */
const SWEEP_INTERVAL_MS = 60_000;

const now = () => Math.floor(Date.now() / 1000);

/** Opens (creating if needed) the SQLite database at `path`; `:memory:` gives a private in-process database. */
export function openSqliteStore(path: string, kind: 'sqlite' | 'memory' = 'sqlite'): Store {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path);
  db.exec(SCHEMA + RECORDS_SCHEMA + API_KEYS_SCHEMA);
  addColumnIfMissing(db, 'oidc_models', 'uses', 'INTEGER NOT NULL DEFAULT 0');
  if (addColumnIfMissing(db, 'oidc_models', 'listed_by', 'TEXT')) listRecordsStoredBefore(db);
  db.exec('CREATE INDEX IF NOT EXISTS oidc_models_listed_by ON oidc_models (model, listed_by) WHERE listed_by IS NOT NULL');
  const connection = new SqliteConnection(db);

  const sweep = () => connection.write(() => {
    const at = now();
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

function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

interface ModelRow {
  id: string;
  payload: string;
  consumed_at: number | null;
}

const LIVE = '(expires_at IS NULL OR expires_at > ?)';
const MODEL_SQL = {
  upsert: `
    INSERT INTO oidc_models (model, id, payload, grant_id, uid, user_code, consumed_at, expires_at, listed_by)
    VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)
    ON CONFLICT (model, id) DO UPDATE SET
      payload = excluded.payload, grant_id = excluded.grant_id, uid = excluded.uid,
      user_code = excluded.user_code, consumed_at = NULL, expires_at = excluded.expires_at, uses = 0,
      listed_by = excluded.listed_by`,
  find: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND id = ? AND ${LIVE}`,
  findByUid: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND uid = ? AND ${LIVE}`,
  findByUserCode: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND user_code = ? AND ${LIVE}`,
  consume: `UPDATE oidc_models SET consumed_at = ? WHERE model = ? AND id = ? AND consumed_at IS NULL AND ${LIVE}`,
  countUse: `UPDATE oidc_models SET uses = uses + 1 WHERE model = ? AND id = ? AND uses < ? AND ${LIVE} RETURNING uses`,
  destroy: 'DELETE FROM oidc_models WHERE model = ? AND id = ?',
  revokeByGrantId: 'DELETE FROM oidc_models WHERE model = ? AND grant_id = ?',
  list: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND ${LIVE} ORDER BY rowid`,
  listBy: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND listed_by = ? AND ${LIVE} ORDER BY rowid`,
} as const;

class SqliteModelStore implements ModelStore {
  readonly #db: SqliteConnection;
  readonly #model: string;

  constructor(db: SqliteConnection, model: string) {
    this.#db = db;
    this.#model = model;
  }

  async upsert(id: string, payload: ModelPayload, expiresIn: number | undefined) {
    const expiresAt = expiresIn ? now() + expiresIn : null;
    await this.#db.write(() => this.#db.statement(MODEL_SQL.upsert).run(
      this.#model, id, JSON.stringify(payload),
      stringOrNull(payload.grantId), stringOrNull(payload.uid), stringOrNull(payload.userCode),
      expiresAt, listedValue(this.#model, payload) ?? null,
    ));
  }

  async find(id: string) {
    return toPayload(this.#db.read(() => this.#db.statement(MODEL_SQL.find).get(this.#model, id, now())));
  }

  async findByUid(uid: string) {
    return toPayload(this.#db.read(() => this.#db.statement(MODEL_SQL.findByUid).get(this.#model, uid, now())));
  }

  async findByUserCode(userCode: string) {
    return toPayload(this.#db.read(() => this.#db.statement(MODEL_SQL.findByUserCode).get(this.#model, userCode, now())));
  }

  async consume(id: string) {
    const timestamp = now();
    const result = await this.#db.write(() => this.#db.statement(MODEL_SQL.consume).run(timestamp, this.#model, id, timestamp));
    return result.changes === 1;
  }

  async countUse(id: string, limit: number) {
    const row = await this.#db.write(() => this.#db.statement(MODEL_SQL.countUse).get(this.#model, id, limit, now())) as { uses: number } | undefined;
    return row?.uses ?? 0;
  }

  async destroy(id: string) {
    await this.#db.write(() => this.#db.statement(MODEL_SQL.destroy).run(this.#model, id));
  }

  async revokeByGrantId(grantId: string) {
    await this.#db.write(() => this.#db.statement(MODEL_SQL.revokeByGrantId).run(this.#model, grantId));
  }

  async list() {
    const rows = this.#db.read(() => this.#db.statement(MODEL_SQL.list).all(this.#model, now())) as unknown as ModelRow[];
    return rows.map((row) => ({ id: row.id, payload: toPayload(row)! }));
  }

  async listBy(value: string) {
    const rows = this.#db.read(() => this.#db.statement(MODEL_SQL.listBy).all(this.#model, value, now())) as unknown as ModelRow[];
    return rows.map((row) => ({ id: row.id, payload: toPayload(row)! }));
  }
}

function toPayload(row: unknown): ModelPayload | undefined {
  if (!row) return undefined;
  const { payload, consumed_at: consumedAt } = row as ModelRow;
  const parsed = JSON.parse(payload) as ModelPayload;
  return consumedAt === null ? parsed : { ...parsed, consumed: consumedAt };
}

interface UserRow {
  id: string;
  email: string;
  name: string;
  given_name: string | null;
  family_name: string | null;
  password_hash: string;
  created_at: number;
}

function toUser(row: unknown): User | undefined {
  if (!row) return undefined;
  const r = row as UserRow;
  return {
    id: r.id,
    email: r.email,
    name: r.name,
    ...(r.given_name ? { givenName: r.given_name } : {}),
    ...(r.family_name ? { familyName: r.family_name } : {}),
    passwordHash: r.password_hash,
    createdAt: r.created_at,
  };
}

class SqliteAccountStore implements AccountStore {
  readonly #db: SqliteConnection;

  constructor(db: SqliteConnection) {
    this.#db = db;
  }

  async createWorkspace(workspace: Workspace) {
    await this.#db.write(() => this.#db.statement('INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, ?)')
      .run(workspace.id, workspace.name, workspace.createdAt));
  }

  async getWorkspace(id: string) {
    const row = this.#db.read(() => this.#db.statement('SELECT id, name, created_at FROM workspaces WHERE id = ?').get(id));
    return row ? toWorkspace(row) : undefined;
  }

  async listWorkspaces() {
    return this.#db.read(() => this.#db.statement('SELECT id, name, created_at FROM workspaces ORDER BY created_at, id').all())
      .map(toWorkspace);
  }

  async createUser(user: User) {
    try {
      await this.#db.write(() => this.#db.statement(`INSERT INTO users (id, email, name, given_name, family_name, password_hash, created_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)`).run(
        user.id, user.email, user.name, user.givenName ?? null, user.familyName ?? null, user.passwordHash, user.createdAt,
      ));
    } catch (error) {
      if (isUniqueViolation(error, 'users.email')) {
        throw new DuplicateError(`a user with email ${user.email} already exists`);
      }
      throw error;
    }
  }

  async getUser(id: string) {
    return toUser(this.#db.read(() => this.#db.statement('SELECT * FROM users WHERE id = ?').get(id)));
  }

  async findUserByEmail(email: string) {
    return toUser(this.#db.read(() => this.#db.statement('SELECT * FROM users WHERE email = ?').get(email)));
  }

  async countUsers() {
    const row = this.#db.read(() => this.#db.statement('SELECT count(*) AS n FROM users').get()) as { n: number };
    return row.n;
  }

  async putMembership(membership: Membership) {
    await this.#db.write(() => this.#db.statement(`INSERT INTO memberships (user_id, workspace_id, role) VALUES (?, ?, ?)
      ON CONFLICT (user_id, workspace_id) DO UPDATE SET role = excluded.role`)
      .run(membership.userId, membership.workspaceId, membership.role));
  }

  async getMembership(userId: string, workspaceId: string) {
    const row = this.#db.read(() => this.#db.statement('SELECT role FROM memberships WHERE user_id = ? AND workspace_id = ?').get(userId, workspaceId)) as { role: Role } | undefined;
    return row && { userId, workspaceId, role: row.role };
  }

  async listMemberships(userId: string) {
    const rows = this.#db.read(() => this.#db.statement(`SELECT m.user_id, m.workspace_id, m.role FROM memberships m
      JOIN workspaces w ON w.id = m.workspace_id WHERE m.user_id = ? ORDER BY w.created_at, w.id`).all(userId));
    return rows.map((row) => {
      const r = row as { user_id: string; workspace_id: string; role: Role };
      return { userId: r.user_id, workspaceId: r.workspace_id, role: r.role };
    });
  }
}

function toWorkspace(row: unknown): Workspace {
  const r = row as { id: string; name: string; created_at: number };
  return { id: r.id, name: r.name, createdAt: r.created_at };
}

class SqliteSettingStore implements SettingStore {
  readonly #db: SqliteConnection;

  constructor(db: SqliteConnection) {
    this.#db = db;
  }

  async get(name: string) {
    const row = this.#db.read(() => this.#db.statement('SELECT value FROM settings WHERE name = ?').get(name)) as { value: string } | undefined;
    return row?.value;
  }

  async setIfAbsent(name: string, value: string) {
    await this.#db.write(() => this.#db.statement('INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING').run(name, value));
    return (await this.get(name))!;
  }

  async put(name: string, value: string) {
    await this.#db.write(() => this.#db.statement('INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value').run(name, value));
  }

  async compareAndSet(name: string, expected: string, value: string) {
    // Writes run in a BEGIN IMMEDIATE transaction: no other process writes between the check and the update.
    const { changes } = await this.#db.write(() => this.#db.statement('UPDATE settings SET value = ? WHERE name = ? AND value = ?').run(value, name, expected));
    return Number(changes) === 1;
  }
}

interface RevocationRow {
  seq: number;
  key: string;
  owner: string | null;
  issued_before: number;
  expires_at: number;
}

const REVOCATION_SQL = {
  // REPLACE gives the row a new, higher seq (AUTOINCREMENT never reuses one), so every instance
  // mirroring the list sees the widened entry on its next read.
  add: `
    INSERT OR REPLACE INTO revocations (key, owner, issued_before, expires_at)
    SELECT :key, coalesce(:owner, r.owner), max(:issuedBefore, coalesce(r.issued_before, 0)), max(:expiresAt, coalesce(r.expires_at, 0))
    FROM (SELECT 1) LEFT JOIN revocations r ON r.key = :key`,
  changesSince: `
    SELECT seq, key, owner, issued_before, expires_at FROM revocations
    WHERE seq > ? AND expires_at > ? ORDER BY seq`,
} as const;

class SqliteRevocationStore implements RevocationStore {
  readonly #db: SqliteConnection;

  constructor(db: SqliteConnection) {
    this.#db = db;
  }

  async add(entry: RevocationEntry) {
    await this.#db.write(() => this.#db.statement(REVOCATION_SQL.add).run({
      key: entry.key, owner: entry.owner ?? null, issuedBefore: entry.issuedBefore, expiresAt: entry.expiresAt,
    }));
  }

  async changesSince(cursor: number) {
    const rows = this.#db.read(() => this.#db.statement(REVOCATION_SQL.changesSince).all(cursor, now())) as unknown as RevocationRow[];
    return {
      entries: rows.map((row) => ({
        key: row.key,
        ...(row.owner ? { owner: row.owner } : {}),
        issuedBefore: row.issued_before,
        expiresAt: row.expires_at,
      })),
      cursor: rows.length ? rows[rows.length - 1]!.seq : cursor,
    };
  }
}
