import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';

import {
  BackendUnavailableError,
  DuplicateError,
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
  db.exec(SCHEMA);

  const sweepModels = db.prepare('DELETE FROM oidc_models WHERE expires_at IS NOT NULL AND expires_at <= ?');
  const sweepRevocations = db.prepare('DELETE FROM revocations WHERE expires_at <= ?');
  const sweep = () => {
    const at = now();
    sweepModels.run(at);
    sweepRevocations.run(at);
  };
  const timer = setInterval(() => guard(sweep), SWEEP_INTERVAL_MS);
  timer.unref();

  const models = new Map<string, ModelStore>();
  let closed = false;

  return {
    kind,
    model(name) {
      let store = models.get(name);
      if (!store) {
        store = new SqliteModelStore(db, name);
        models.set(name, store);
      }
      return store;
    },
    accounts: new SqliteAccountStore(db),
    settings: new SqliteSettingStore(db),
    revocations: new SqliteRevocationStore(db),
    async ping() {
      if (closed) throw new BackendUnavailableError('the SQLite store is closed');
      guard(() => db.prepare('SELECT 1').get());
    },
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      db.close();
    },
  };
}

/** Turns SQLite I/O failures (disk gone, file locked for too long) into the storage error the HTTP layer maps to 503. */
function guard<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    if (error instanceof Error && /SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|READONLY)|database is (locked|closed)|not open|statement has been finalized/i.test(error.message)) {
      throw new BackendUnavailableError(`SQLite store unavailable: ${error.message}`, { cause: error });
    }
    throw error;
  }
}

function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

interface ModelRow {
  id: string;
  payload: string;
  consumed_at: number | null;
}

class SqliteModelStore implements ModelStore {
  readonly #upsert: StatementSync;
  readonly #find: StatementSync;
  readonly #findByUid: StatementSync;
  readonly #findByUserCode: StatementSync;
  readonly #consume: StatementSync;
  readonly #destroy: StatementSync;
  readonly #revokeByGrantId: StatementSync;
  readonly #list: StatementSync;
  readonly #model: string;

  constructor(db: DatabaseSync, model: string) {
    this.#model = model;
    this.#upsert = db.prepare(`
      INSERT INTO oidc_models (model, id, payload, grant_id, uid, user_code, consumed_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, NULL, ?)
      ON CONFLICT (model, id) DO UPDATE SET
        payload = excluded.payload, grant_id = excluded.grant_id, uid = excluded.uid,
        user_code = excluded.user_code, consumed_at = NULL, expires_at = excluded.expires_at`);
    const live = '(expires_at IS NULL OR expires_at > ?)';
    this.#find = db.prepare(`SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND id = ? AND ${live}`);
    this.#findByUid = db.prepare(`SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND uid = ? AND ${live}`);
    this.#findByUserCode = db.prepare(`SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND user_code = ? AND ${live}`);
    this.#consume = db.prepare(`UPDATE oidc_models SET consumed_at = ? WHERE model = ? AND id = ? AND consumed_at IS NULL AND ${live}`);
    this.#destroy = db.prepare('DELETE FROM oidc_models WHERE model = ? AND id = ?');
    this.#revokeByGrantId = db.prepare('DELETE FROM oidc_models WHERE model = ? AND grant_id = ?');
    this.#list = db.prepare(`SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND ${live} ORDER BY rowid`);
  }

  async upsert(id: string, payload: ModelPayload, expiresIn: number | undefined) {
    const expiresAt = expiresIn ? now() + expiresIn : null;
    guard(() => this.#upsert.run(
      this.#model, id, JSON.stringify(payload),
      stringOrNull(payload.grantId), stringOrNull(payload.uid), stringOrNull(payload.userCode),
      expiresAt,
    ));
  }

  async find(id: string) {
    return toPayload(guard(() => this.#find.get(this.#model, id, now())));
  }

  async findByUid(uid: string) {
    return toPayload(guard(() => this.#findByUid.get(this.#model, uid, now())));
  }

  async findByUserCode(userCode: string) {
    return toPayload(guard(() => this.#findByUserCode.get(this.#model, userCode, now())));
  }

  async consume(id: string) {
    const timestamp = now();
    const result = guard(() => this.#consume.run(timestamp, this.#model, id, timestamp));
    return result.changes === 1;
  }

  async destroy(id: string) {
    guard(() => this.#destroy.run(this.#model, id));
  }

  async revokeByGrantId(grantId: string) {
    guard(() => this.#revokeByGrantId.run(this.#model, grantId));
  }

  async list() {
    const rows = guard(() => this.#list.all(this.#model, now())) as unknown as ModelRow[];
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
  readonly #db: DatabaseSync;

  constructor(db: DatabaseSync) {
    this.#db = db;
  }

  async createWorkspace(workspace: Workspace) {
    guard(() => this.#db.prepare('INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, ?)')
      .run(workspace.id, workspace.name, workspace.createdAt));
  }

  async getWorkspace(id: string) {
    const row = guard(() => this.#db.prepare('SELECT id, name, created_at FROM workspaces WHERE id = ?').get(id));
    return row ? toWorkspace(row) : undefined;
  }

  async listWorkspaces() {
    return guard(() => this.#db.prepare('SELECT id, name, created_at FROM workspaces ORDER BY created_at, id').all())
      .map(toWorkspace);
  }

  async createUser(user: User) {
    try {
      guard(() => this.#db.prepare(`INSERT INTO users (id, email, name, given_name, family_name, password_hash, created_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)`).run(
        user.id, user.email, user.name, user.givenName ?? null, user.familyName ?? null, user.passwordHash, user.createdAt,
      ));
    } catch (error) {
      if (error instanceof Error && /UNIQUE constraint failed: users\.email/.test(error.message)) {
        throw new DuplicateError(`a user with email ${user.email} already exists`);
      }
      throw error;
    }
  }

  async getUser(id: string) {
    return toUser(guard(() => this.#db.prepare('SELECT * FROM users WHERE id = ?').get(id)));
  }

  async findUserByEmail(email: string) {
    return toUser(guard(() => this.#db.prepare('SELECT * FROM users WHERE email = ?').get(email)));
  }

  async countUsers() {
    const row = guard(() => this.#db.prepare('SELECT count(*) AS n FROM users').get()) as { n: number };
    return row.n;
  }

  async putMembership(membership: Membership) {
    guard(() => this.#db.prepare(`INSERT INTO memberships (user_id, workspace_id, role) VALUES (?, ?, ?)
      ON CONFLICT (user_id, workspace_id) DO UPDATE SET role = excluded.role`)
      .run(membership.userId, membership.workspaceId, membership.role));
  }

  async listMemberships(userId: string) {
    const rows = guard(() => this.#db.prepare(`SELECT m.user_id, m.workspace_id, m.role FROM memberships m
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
  readonly #db: DatabaseSync;

  constructor(db: DatabaseSync) {
    this.#db = db;
  }

  async get(name: string) {
    const row = guard(() => this.#db.prepare('SELECT value FROM settings WHERE name = ?').get(name)) as { value: string } | undefined;
    return row?.value;
  }

  async setIfAbsent(name: string, value: string) {
    guard(() => this.#db.prepare('INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING').run(name, value));
    return (await this.get(name))!;
  }
}

interface RevocationRow {
  seq: number;
  key: string;
  owner: string | null;
  issued_before: number;
  expires_at: number;
}

class SqliteRevocationStore implements RevocationStore {
  readonly #add: StatementSync;
  readonly #changesSince: StatementSync;

  constructor(db: DatabaseSync) {
    // REPLACE gives the row a new, higher seq (AUTOINCREMENT never reuses one), so every instance
    // mirroring the list sees the widened entry on its next read.
    this.#add = db.prepare(`
      INSERT OR REPLACE INTO revocations (key, owner, issued_before, expires_at)
      SELECT :key, coalesce(:owner, r.owner), max(:issuedBefore, coalesce(r.issued_before, 0)), max(:expiresAt, coalesce(r.expires_at, 0))
      FROM (SELECT 1) LEFT JOIN revocations r ON r.key = :key`);
    this.#changesSince = db.prepare(`
      SELECT seq, key, owner, issued_before, expires_at FROM revocations
      WHERE seq > ? AND expires_at > ? ORDER BY seq`);
  }

  async add(entry: RevocationEntry) {
    guard(() => this.#add.run({
      key: entry.key, owner: entry.owner ?? null, issuedBefore: entry.issuedBefore, expiresAt: entry.expiresAt,
    }));
  }

  async changesSince(cursor: number) {
    const rows = guard(() => this.#changesSince.all(cursor, now())) as unknown as RevocationRow[];
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
