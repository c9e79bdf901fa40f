import { isUniqueViolation, type SqliteConnection } from './connection.ts';
import { DuplicateError, withoutNulls, type DataRecord, type RecordPage, type RecordStore } from '../store.ts';

/** `position` is the row's seq: AUTOINCREMENT never reuses one, so a cursor stays meaningful after deletes. */
export const RECORDS_SCHEMA = `
CREATE TABLE IF NOT EXISTS records (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  workspace_id TEXT NOT NULL,
  object TEXT NOT NULL,
  id TEXT NOT NULL,
  data TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (workspace_id, object, id)
);
CREATE INDEX IF NOT EXISTS records_page ON records (workspace_id, object, seq);
`;

interface RecordRow {
  seq: number;
  id: string;
  data: string;
  created_at: string;
  updated_at: string;
}

const COLUMNS = 'seq, id, data, created_at, updated_at';
const SQL = {
  create: `INSERT INTO records (workspace_id, object, id, data, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
  get: `SELECT ${COLUMNS} FROM records WHERE workspace_id = ? AND object = ? AND id = ?`,
  existing: `SELECT id FROM records WHERE workspace_id = ? AND object = ? AND id IN (SELECT value FROM json_each(?))`,
  page: `SELECT ${COLUMNS} FROM records WHERE workspace_id = ? AND object = ? AND seq > ? ORDER BY seq LIMIT ?`,
  count: 'SELECT count(*) AS n FROM records WHERE workspace_id = ? AND object = ?',
  // json_patch is RFC 7396 merge patch: a null member removes the field, as the interface asks.
  update: `UPDATE records SET data = json_patch(data, ?), updated_at = ? WHERE workspace_id = ? AND object = ? AND id = ? RETURNING ${COLUMNS}`,
  delete: 'DELETE FROM records WHERE workspace_id = ? AND object = ? AND id = ?',
  deleteAll: 'DELETE FROM records WHERE workspace_id = ? AND object = ?',
} as const;

export class SqliteRecordStore implements RecordStore {
  readonly #db: SqliteConnection;

  constructor(db: SqliteConnection) {
    this.#db = db;
  }

  async create(workspaceId: string, object: string, record: Omit<DataRecord, 'position'>) {
    try {
      const row = await this.#db.write(() => this.#db.statement(SQL.create)
        .get(workspaceId, object, record.id, JSON.stringify(withoutNulls(record.values)), record.createdAt, record.updatedAt));
      return toRecord(row as unknown as RecordRow);
    } catch (error) {
      if (isUniqueViolation(error)) throw new DuplicateError(`a record of ${object} with id ${record.id} exists`);
      throw error;
    }
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
    const result = await this.#db.write(() => this.#db.statement(SQL.delete).run(workspaceId, object, id));
    return result.changes === 1;
  }

  async deleteAll(workspaceId: string, object: string) {
    const result = await this.#db.write(() => this.#db.statement(SQL.deleteAll).run(workspaceId, object));
    return Number(result.changes);
  }
}

function toRecord(row: RecordRow): DataRecord {
  return { id: row.id, position: row.seq, createdAt: row.created_at, updatedAt: row.updated_at, values: JSON.parse(row.data) as Record<string, unknown> };
}
