import { DuplicateError, type AccountStore, type Membership, type Role, type User, type Workspace } from '../store.ts';
import { isUniqueViolation, type SqliteConnection } from './connection.ts';

/** Workspaces, users and memberships. */
export const ACCOUNTS_SCHEMA = `
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
`;

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

export class SqliteAccountStore implements AccountStore {
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
