import { DuplicateError, LastAdminError, type AccountStore, type Membership, type Role, type User, type Workspace } from '../store.ts';
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

  async deleteWorkspace(id: string) {
    // Its memberships go with it (ON DELETE CASCADE).
    const result = await this.#db.erase(() => this.#db.statement('DELETE FROM workspaces WHERE id = ?').run(id));
    return result.changes === 1;
  }

  async listUsers() {
    return this.#db.read(() => this.#db.statement('SELECT * FROM users ORDER BY created_at, id').all()).map((row) => toUser(row)!);
  }

  async setPasswordHash(userId: string, passwordHash: string) {
    const result = await this.#db.write(() => this.#db.statement('UPDATE users SET password_hash = ? WHERE id = ?').run(passwordHash, userId));
    return result.changes === 1;
  }

  async deleteUser(userId: string) {
    // Checked and deleted in one transaction (the write lock held from its start), so no concurrent
    // change can take the other admin away between the check and the delete.
    const result = await this.#db.erase(() => {
      const adminOf = this.#db.statement("SELECT workspace_id FROM memberships WHERE user_id = ? AND role = 'admin'").all(userId) as Array<{ workspace_id: string }>;
      for (const { workspace_id: workspaceId } of adminOf) this.#keepsAnAdmin(userId, workspaceId);
      // Their memberships go with them (ON DELETE CASCADE).
      return this.#db.statement('DELETE FROM users WHERE id = ?').run(userId);
    });
    return result.changes === 1;
  }

  async putMembership(membership: Membership) {
    await this.#db.write(() => {
      if (membership.role !== 'admin' && this.#roleOf(membership.userId, membership.workspaceId) === 'admin') {
        this.#keepsAnAdmin(membership.userId, membership.workspaceId);
      }
      this.#db.statement(`INSERT INTO memberships (user_id, workspace_id, role) VALUES (?, ?, ?)
        ON CONFLICT (user_id, workspace_id) DO UPDATE SET role = excluded.role`)
        .run(membership.userId, membership.workspaceId, membership.role);
    });
  }

  async removeMembership(userId: string, workspaceId: string) {
    const result = await this.#db.write(() => {
      if (this.#roleOf(userId, workspaceId) === 'admin') this.#keepsAnAdmin(userId, workspaceId);
      return this.#db.statement('DELETE FROM memberships WHERE user_id = ? AND workspace_id = ?').run(userId, workspaceId);
    });
    return result.changes === 1;
  }

  async listMembers(workspaceId: string) {
    const rows = this.#db.read(() => this.#db.statement('SELECT user_id, role FROM memberships WHERE workspace_id = ?').all(workspaceId)) as Array<{ user_id: string; role: Role }>;
    return rows.map((row) => ({ userId: row.user_id, workspaceId, role: row.role }));
  }

  /** Within a write: throws LastAdminError unless the workspace has an admin other than the user. Before anything is written, so nothing is. */
  #keepsAnAdmin(userId: string, workspaceId: string): void {
    const other = this.#db.statement("SELECT 1 FROM memberships WHERE workspace_id = ? AND role = 'admin' AND user_id <> ? LIMIT 1").get(workspaceId, userId);
    if (!other) throw new LastAdminError(workspaceId);
  }

  #roleOf(userId: string, workspaceId: string): Role | undefined {
    const row = this.#db.statement('SELECT role FROM memberships WHERE user_id = ? AND workspace_id = ?').get(userId, workspaceId) as { role: Role } | undefined;
    return row?.role;
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
