import { nowSeconds } from '../../src/shared/clock.ts';
import type { RevocationEntry, RevocationStore } from '../store.ts';
import type { SqliteConnection } from './connection.ts';

/** The revocation list of JWT access tokens (src/tokens/revocation_list.ts). */
export const REVOCATIONS_SCHEMA = `
CREATE TABLE IF NOT EXISTS revocations (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL UNIQUE,
  owner TEXT,
  issued_before INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS revocations_expiry ON revocations (expires_at);
`;

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

export class SqliteRevocationStore implements RevocationStore {
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
    const rows = this.#db.read(() => this.#db.statement(REVOCATION_SQL.changesSince).all(cursor, nowSeconds())) as unknown as RevocationRow[];
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
