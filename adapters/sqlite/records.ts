import { nowSeconds } from '../../src/shared/clock.ts';
import { isUniqueViolation, type SqliteConnection } from './connection.ts';
import { DuplicateError, withoutNulls, type DataRecord, type EarlierCreate, type KeyedCreate, type RecordPage, type RecordStore } from '../store.ts';

/**
 * A record's `position` orders its list (one object of one workspace) and is what a cursor holds.
 * It is max(the list's last position + 1, now in ms), as on Redis: a list's own, so a cursor says
 * nothing of how many records other workspaces make (the row's seq is store-wide), and kept in
 * record_positions, so none is given twice after deletes. The clock is SQLite's, as Redis's is its
 * own. Databases made before positions were per list keep their records' seq as their position:
 * every seq is far below the clock, so the lists' order holds.
 */
export const RECORDS_SCHEMA = `
CREATE TABLE IF NOT EXISTS records (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  workspace_id TEXT NOT NULL,
  object TEXT NOT NULL,
  id TEXT NOT NULL,
  data TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  position INTEGER,
  UNIQUE (workspace_id, object, id)
);
CREATE TABLE IF NOT EXISTS record_positions (
  workspace_id TEXT NOT NULL,
  object TEXT NOT NULL,
  last INTEGER NOT NULL,
  PRIMARY KEY (workspace_id, object)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS record_creates (
  workspace_id TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  object TEXT NOT NULL,
  id TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (workspace_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS record_creates_expiry ON record_creates (expires_at);
DROP INDEX IF EXISTS records_page;
`;

/** Keyed creates kept past their time, for the store's periodic sweep (reads already ignore them). */
export const SWEEP_EXPIRED_RECORD_CREATES = 'DELETE FROM record_creates WHERE expires_at <= ?';

/** Run once the position column exists (databases made before it get it as they are opened). */
export const RECORDS_INDEX = 'CREATE INDEX IF NOT EXISTS records_by_position ON records (workspace_id, object, position);';

interface RecordRow {
  position: number;
  id: string;
  data: string;
  created_at: string;
  updated_at: string;
}

const COLUMNS = 'position, id, data, created_at, updated_at';
const SQL = {
  nextPosition: `INSERT INTO record_positions (workspace_id, object, last) VALUES (?, ?, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    ON CONFLICT (workspace_id, object) DO UPDATE SET last = max(last + 1, excluded.last) RETURNING last`,
  create: `INSERT INTO records (workspace_id, object, id, data, created_at, updated_at, position) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
  get: `SELECT ${COLUMNS} FROM records WHERE workspace_id = ? AND object = ? AND id = ?`,
  existing: `SELECT id FROM records WHERE workspace_id = ? AND object = ? AND id IN (SELECT value FROM json_each(?))`,
  page: `SELECT ${COLUMNS} FROM records WHERE workspace_id = ? AND object = ? AND position > ? ORDER BY position LIMIT ?`,
  count: 'SELECT count(*) AS n FROM records WHERE workspace_id = ? AND object = ?',
  // json_patch is RFC 7396 merge patch: a null member removes the field, as the interface asks.
  update: `UPDATE records SET data = json_patch(data, ?), updated_at = ? WHERE workspace_id = ? AND object = ? AND id = ? RETURNING ${COLUMNS}`,
  delete: 'DELETE FROM records WHERE workspace_id = ? AND object = ? AND id = ?',
  deleteAll: 'DELETE FROM records WHERE workspace_id = ? AND object = ?',
  forgetPositions: 'DELETE FROM record_positions WHERE workspace_id = ? AND object = ?',
  earlierCreate: 'SELECT fingerprint, object, id FROM record_creates WHERE workspace_id = ? AND key = ? AND expires_at > ?',
  // A row past its time that the sweep has not reached yet is replaced.
  keepCreate: `INSERT INTO record_creates (workspace_id, key, fingerprint, object, id, expires_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (workspace_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, object = excluded.object, id = excluded.id, expires_at = excluded.expires_at`,
  forgetCreates: 'DELETE FROM record_creates WHERE workspace_id = ? AND object = ?',
} as const;

export class SqliteRecordStore implements RecordStore {
  readonly #db: SqliteConnection;

  constructor(db: SqliteConnection) {
    this.#db = db;
  }

  async create(workspaceId: string, object: string, record: Omit<DataRecord, 'position'>) {
    try {
      return toRecord(await this.#db.write(() => this.#insert(workspaceId, object, record)));
    } catch (error) {
      throw duplicate(error, object, record.id);
    }
  }

  async createOnce(workspaceId: string, object: string, record: Omit<DataRecord, 'position'>, keyed: KeyedCreate) {
    try {
      // Atomically: a record kept without its key would be made again by the retry.
      return await this.#db.writeAtomically((): { created: DataRecord } | { earlier: EarlierCreate } => {
        const now = nowSeconds();
        const earlier = this.#earlier(workspaceId, keyed.key, now);
        if (earlier) return { earlier };
        const row = this.#insert(workspaceId, object, record);
        this.#db.statement(SQL.keepCreate).run(workspaceId, keyed.key, keyed.fingerprint, object, record.id, Math.ceil(now + keyed.keptFor));
        return { created: toRecord(row) };
      });
    } catch (error) {
      throw duplicate(error, object, record.id);
    }
  }

  async earlierCreate(workspaceId: string, key: string) {
    return this.#db.read(() => this.#earlier(workspaceId, key, nowSeconds()));
  }

  #earlier(workspaceId: string, key: string, now: number): EarlierCreate | undefined {
    const row = this.#db.statement(SQL.earlierCreate).get(workspaceId, key, now) as EarlierCreate | undefined;
    return row && { fingerprint: row.fingerprint, object: row.object, id: row.id };
  }

  /** Within a write: the record at the list's next position. */
  #insert(workspaceId: string, object: string, record: Omit<DataRecord, 'position'>): RecordRow {
    // A position a duplicate id took is skipped, never given: positions only need to grow.
    const { last } = this.#db.statement(SQL.nextPosition).get(workspaceId, object) as { last: number };
    return this.#db.statement(SQL.create)
      .get(workspaceId, object, record.id, JSON.stringify(withoutNulls(record.values)), record.createdAt, record.updatedAt, last) as unknown as RecordRow;
  }

  async get(workspaceId: string, object: string, id: string) {
    const row = this.#db.read(() => this.#db.statement(SQL.get).get(workspaceId, object, id)) as RecordRow | undefined;
    return row && toRecord(row);
  }

  async existing(workspaceId: string, object: string, ids: string[]) {
    if (!ids.length) return new Set<string>();
    const rows = this.#db.read(() => this.#db.statement(SQL.existing).all(workspaceId, object, JSON.stringify(ids))) as Array<{ id: string }>;
    return new Set(rows.map((row) => row.id));
  }

  async list(workspaceId: string, object: string, after: number, limit: number): Promise<RecordPage> {
    return this.#db.read(() => {
      const rows = this.#db.statement(SQL.page).all(workspaceId, object, after, limit + 1) as unknown as RecordRow[];
      const { n } = this.#db.statement(SQL.count).get(workspaceId, object) as { n: number };
      return { records: rows.slice(0, limit).map(toRecord), total: n, hasMore: rows.length > limit };
    });
  }

  async update(workspaceId: string, object: string, id: string, changes: Record<string, unknown>, updatedAt: string) {
    const row = await this.#db.write(() => this.#db.statement(SQL.update)
      .get(JSON.stringify(changes), updatedAt, workspaceId, object, id)) as RecordRow | undefined;
    return row && toRecord(row);
  }

  async delete(workspaceId: string, object: string, id: string) {
    const result = await this.#db.erase(() => this.#db.statement(SQL.delete).run(workspaceId, object, id));
    return result.changes === 1;
  }

  async deleteAll(workspaceId: string, object: string) {
    // Only a deleted workspace's lists are emptied this way, and none of them gets a record again.
    const result = await this.#db.erase(() => {
      this.#db.statement(SQL.forgetPositions).run(workspaceId, object);
      this.#db.statement(SQL.forgetCreates).run(workspaceId, object);
      return this.#db.statement(SQL.deleteAll).run(workspaceId, object);
    });
    return Number(result.changes);
  }
}

/** A unique violation as the DuplicateError the interface promises; anything else as it is. */
function duplicate(error: unknown, object: string, id: string): unknown {
  return isUniqueViolation(error) ? new DuplicateError(`a record of ${object} with id ${id} exists`) : error;
}

function toRecord(row: RecordRow): DataRecord {
  return { id: row.id, position: row.position, createdAt: row.created_at, updatedAt: row.updated_at, values: JSON.parse(row.data) as Record<string, unknown> };
}
