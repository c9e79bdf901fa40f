import type { SettingStore } from '../store.ts';
import type { SqliteConnection } from './connection.ts';

/** Small named values (signing keys, cookie keys). */
export const SETTINGS_SCHEMA = `
CREATE TABLE IF NOT EXISTS settings (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
`;

export class SqliteSettingStore implements SettingStore {
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
