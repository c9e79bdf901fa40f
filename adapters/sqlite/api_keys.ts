import { nowSeconds } from '../../src/shared/clock.ts';
import { isUniqueViolation, type SqliteConnection } from './connection.ts';
import { DuplicateError, type ApiKeyRecord, type ApiKeyStore } from '../store.ts';

export const API_KEYS_SCHEMA = `
CREATE TABLE IF NOT EXISTS api_keys (
  id TEXT PRIMARY KEY,
  workspace_id TEXT NOT NULL,
  name TEXT NOT NULL,
  digest TEXT NOT NULL UNIQUE,
  hint TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  last_used_at INTEGER
);
CREATE INDEX IF NOT EXISTS api_keys_workspace ON api_keys (workspace_id, created_at);
CREATE INDEX IF NOT EXISTS api_keys_expiry ON api_keys (expires_at) WHERE expires_at IS NOT NULL;
`;

/** Expired keys, for the store's periodic sweep (reads already ignore them). */
export const SWEEP_EXPIRED_API_KEYS = 'DELETE FROM api_keys WHERE expires_at IS NOT NULL AND expires_at <= ?';

interface ApiKeyRow {
  id: string;
  workspace_id: string;
  name: string;
  digest: string;
  hint: string;
  created_at: number;
  expires_at: number | null;
  last_used_at: number | null;
}

const LIVE = '(expires_at IS NULL OR expires_at > ?)';
const SQL = {
  create: `INSERT INTO api_keys (id, workspace_id, name, digest, hint, created_at, expires_at, last_used_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, NULL)`,
  findByDigest: `SELECT * FROM api_keys WHERE digest = ? AND ${LIVE}`,
  get: `SELECT * FROM api_keys WHERE id = ? AND ${LIVE}`,
  list: `SELECT * FROM api_keys WHERE workspace_id = ? AND ${LIVE} ORDER BY created_at, rowid`,
  delete: 'DELETE FROM api_keys WHERE id = ?',
  touch: 'UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, 0), ?) WHERE id = ?',
} as const;

export class SqliteApiKeyStore implements ApiKeyStore {
  readonly #db: SqliteConnection;

  constructor(db: SqliteConnection) {
    this.#db = db;
  }

  async create(key: ApiKeyRecord) {
    try {
      await this.#db.write(() => this.#db.statement(SQL.create)
        .run(key.id, key.workspaceId, key.name, key.digest, key.hint, key.createdAt, key.expiresAt ?? null));
    } catch (error) {
      if (isUniqueViolation(error)) throw new DuplicateError('an API key with this id or digest exists');
      throw error;
    }
  }

  async findByDigest(digest: string) {
    return toKey(this.#db.read(() => this.#db.statement(SQL.findByDigest).get(digest, nowSeconds())));
  }

  async get(id: string) {
    return toKey(this.#db.read(() => this.#db.statement(SQL.get).get(id, nowSeconds())));
  }

  async list(workspaceId: string) {
    const rows = this.#db.read(() => this.#db.statement(SQL.list).all(workspaceId, nowSeconds()));
    return rows.map((row) => toKey(row)!);
  }

  async delete(id: string) {
    const result = await this.#db.write(() => this.#db.statement(SQL.delete).run(id));
    return result.changes === 1;
  }

  async touch(id: string, lastUsedAt: number) {
    await this.#db.write(() => this.#db.statement(SQL.touch).run(lastUsedAt, id));
  }
}

function toKey(row: unknown): ApiKeyRecord | undefined {
  if (!row) return undefined;
  const r = row as ApiKeyRow;
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    name: r.name,
    digest: r.digest,
    hint: r.hint,
    createdAt: r.created_at,
    ...(r.expires_at === null ? {} : { expiresAt: r.expires_at }),
    ...(r.last_used_at === null ? {} : { lastUsedAt: r.last_used_at }),
  };
}
