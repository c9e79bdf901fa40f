import { randomUUID } from 'node:crypto';

import { nowSeconds, systemClock } from '../../src/shared/clock.ts';
import { type Completion, COMPLETION_MARK_SECONDS, listedValue, type ModelPayload, type ModelStore } from '../store.ts';
import type { SqliteConnection } from './connection.ts';

/** The engine's models (oidc-provider's records), one table for all of them. */
export const MODELS_SCHEMA = `
CREATE TABLE IF NOT EXISTS oidc_models (
  model TEXT NOT NULL,
  id TEXT NOT NULL,
  payload TEXT NOT NULL,
  grant_id TEXT,
  uid TEXT,
  user_code TEXT,
  consumed_at INTEGER,
  claim TEXT,
  completed_by TEXT,
  expires_at INTEGER,
  uses INTEGER NOT NULL DEFAULT 0,
  listed_by TEXT,
  PRIMARY KEY (model, id)
);
CREATE INDEX IF NOT EXISTS oidc_models_grant ON oidc_models (grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_models_uid ON oidc_models (model, uid) WHERE uid IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_models_user_code ON oidc_models (model, user_code) WHERE user_code IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_models_expiry ON oidc_models (expires_at) WHERE expires_at IS NOT NULL;
`;

function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

interface ModelRow {
  id: string;
  payload: string;
  consumed_at: number | null;
}

/** A record that has not expired and is not a completion's mark (completed_by: the claim that completed it, ModelStore.complete). */
const LIVE = 'completed_by IS NULL AND (expires_at IS NULL OR expires_at > ?)';
const MODEL_SQL = {
  upsert: `
    INSERT INTO oidc_models (model, id, payload, grant_id, uid, user_code, consumed_at, expires_at, listed_by)
    VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)
    ON CONFLICT (model, id) DO UPDATE SET
      payload = excluded.payload, grant_id = excluded.grant_id, uid = excluded.uid,
      user_code = excluded.user_code, consumed_at = NULL, claim = NULL, completed_by = NULL, expires_at = excluded.expires_at, uses = 0,
      listed_by = excluded.listed_by`,
  find: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND id = ? AND ${LIVE}`,
  findByUid: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND uid = ? AND ${LIVE}`,
  findByUserCode: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND user_code = ? AND ${LIVE}`,
  consume: `UPDATE oidc_models SET consumed_at = ?, claim = ?
    WHERE model = ? AND id = ? AND (consumed_at IS NULL OR consumed_at <= ?) AND ${LIVE}`,
  release: 'UPDATE oidc_models SET consumed_at = NULL, claim = NULL WHERE model = ? AND id = ? AND claim = ?',
  // The record becomes its completion's mark: nothing of it kept but its id and the claim.
  complete: `UPDATE oidc_models SET completed_by = claim, payload = '{}', grant_id = NULL, uid = NULL, user_code = NULL, listed_by = NULL, expires_at = ?
    WHERE model = ? AND id = ? AND claim = ? AND consumed_at IS NOT NULL AND completed_by IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
  forgetCompletion: 'DELETE FROM oidc_models WHERE model = ? AND id = ? AND completed_by = ?',
  completion: 'SELECT claim, consumed_at, completed_by FROM oidc_models WHERE model = ? AND id = ? AND (expires_at IS NULL OR expires_at > ?)',
  insertNew: `
    INSERT INTO oidc_models (model, id, payload, expires_at) VALUES (?, ?, ?, ?)
    ON CONFLICT (model, id) DO UPDATE SET
      payload = excluded.payload, grant_id = NULL, uid = NULL, user_code = NULL, consumed_at = NULL, claim = NULL, completed_by = NULL,
      expires_at = excluded.expires_at, uses = 0, listed_by = NULL
    WHERE oidc_models.expires_at IS NOT NULL AND oidc_models.expires_at <= ?`,
  countUse: `UPDATE oidc_models SET uses = uses + 1 WHERE model = ? AND id = ? AND uses < ? AND ${LIVE} RETURNING uses`,
  destroy: 'DELETE FROM oidc_models WHERE model = ? AND id = ?',
  revokeByGrantId: 'DELETE FROM oidc_models WHERE model = ? AND grant_id = ?',
  list: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND ${LIVE} ORDER BY rowid`,
  listBy: `SELECT id, payload, consumed_at FROM oidc_models WHERE model = ? AND listed_by = ? AND ${LIVE} ORDER BY rowid`,
} as const;

/** The second a record given `expiresIn` seconds (a fraction allowed) expires at, as the column counts them. */
function expirySecond(expiresIn: number): number {
  return Math.floor(systemClock() / 1000 + expiresIn);
}

export class SqliteModelStore implements ModelStore {
  readonly #db: SqliteConnection;
  readonly #model: string;

  constructor(db: SqliteConnection, model: string) {
    this.#db = db;
    this.#model = model;
  }

  async upsert(id: string, payload: ModelPayload, expiresIn: number | undefined) {
    const expiresAt = expiresIn ? expirySecond(expiresIn) : null;
    await this.#db.write(() => this.#db.statement(MODEL_SQL.upsert).run(
      this.#model, id, JSON.stringify(payload),
      stringOrNull(payload.grantId), stringOrNull(payload.uid), stringOrNull(payload.userCode),
      expiresAt, listedValue(this.#model, payload) ?? null,
    ));
  }

  async find(id: string) {
    return toPayload(this.#db.read(() => this.#db.statement(MODEL_SQL.find).get(this.#model, id, nowSeconds())));
  }

  async findByUid(uid: string) {
    return toPayload(this.#db.read(() => this.#db.statement(MODEL_SQL.findByUid).get(this.#model, uid, nowSeconds())));
  }

  async findByUserCode(userCode: string) {
    return toPayload(this.#db.read(() => this.#db.statement(MODEL_SQL.findByUserCode).get(this.#model, userCode, nowSeconds())));
  }

  async consume(id: string, takeOverBefore?: number) {
    const timestamp = nowSeconds();
    const claim = randomUUID();
    const result = await this.#db.write(() => this.#db.statement(MODEL_SQL.consume).run(timestamp, claim, this.#model, id, takeOverBefore ?? null, timestamp));
    if (result.changes !== 1) return undefined;
    // Committed before it is a claim: the redemption builds on it, and a commit that then failed (a
    // full disk) would undo it unseen, the completion finding the code or token unclaimed.
    await this.#db.committed();
    return claim;
  }

  async release(id: string, claim: string) {
    await this.#db.write(() => this.#db.statement(MODEL_SQL.release).run(this.#model, id, claim));
  }

  complete(id: string, claim: string) {
    return this.#db.write((): Completion => {
      const now = nowSeconds();
      if (this.#db.statement(MODEL_SQL.complete).run(now + COMPLETION_MARK_SECONDS, this.#model, id, claim, now).changes === 1) return 'completed';
      const found = this.#completion(id, claim);
      return found === 'pending' ? 'unclaimed' : found;
    });
  }

  async forgetCompletion(id: string, claim: string) {
    await this.#db.write(() => this.#db.statement(MODEL_SQL.forgetCompletion).run(this.#model, id, claim));
  }

  async completionOf(id: string, claim: string) {
    return this.#db.read(() => this.#completion(id, claim));
  }

  #completion(id: string, claim: string): Completion | 'pending' {
    const row = this.#db.statement(MODEL_SQL.completion).get(this.#model, id, nowSeconds()) as { claim: string | null; consumed_at: number | null; completed_by: string | null } | undefined;
    if (!row) return 'gone';
    if (row.completed_by !== null) return row.completed_by === claim ? 'completed' : 'unclaimed';
    return row.claim === claim && row.consumed_at !== null ? 'pending' : 'unclaimed';
  }

  async insertNew(id: string, payload: ModelPayload, expiresIn: number) {
    const result = await this.#db.write(() => this.#db.statement(MODEL_SQL.insertNew).run(this.#model, id, JSON.stringify(payload), expirySecond(expiresIn), nowSeconds()));
    return result.changes === 1;
  }

  async countUse(id: string, limit: number) {
    const row = await this.#db.write(() => this.#db.statement(MODEL_SQL.countUse).get(this.#model, id, limit, nowSeconds())) as { uses: number } | undefined;
    return row?.uses ?? 0;
  }

  async destroy(id: string) {
    await this.#db.write(() => this.#db.statement(MODEL_SQL.destroy).run(this.#model, id));
  }

  /** A failed commit keeps none of the request's writes, so there is only ever a record written in this one to delete. */
  discard(id: string) {
    return this.destroy(id);
  }

  async revokeByGrantId(grantId: string) {
    await this.#db.write(() => this.#db.statement(MODEL_SQL.revokeByGrantId).run(this.#model, grantId));
  }

  async list() {
    const rows = this.#db.read(() => this.#db.statement(MODEL_SQL.list).all(this.#model, nowSeconds())) as unknown as ModelRow[];
    return rows.map((row) => ({ id: row.id, payload: toPayload(row)! }));
  }

  async listBy(value: string) {
    const rows = this.#db.read(() => this.#db.statement(MODEL_SQL.listBy).all(this.#model, value, nowSeconds())) as unknown as ModelRow[];
    return rows.map((row) => ({ id: row.id, payload: toPayload(row)! }));
  }
}

function toPayload(row: unknown): ModelPayload | undefined {
  if (!row) return undefined;
  const { payload, consumed_at: consumedAt } = row as ModelRow;
  const parsed = JSON.parse(payload) as ModelPayload;
  return consumedAt === null ? parsed : { ...parsed, consumed: consumedAt };
}
