import type { DatabaseSync, StatementSync } from 'node:sqlite';

import { BackendUnavailableError } from '../store.ts';

export class SqliteConnection {
  readonly #db: DatabaseSync;
  readonly #statements = new Map<string, StatementSync>();
  /** Settles when the open transaction has committed; undefined when none is open. */
  #commit: Promise<void> | undefined;

  constructor(db: DatabaseSync) {
    this.#db = db;
  }

  statement(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = guard(() => this.#db.prepare(sql));
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  read<T>(work: () => T): T {
    return guard(work);
  }

  write<T>(work: () => T): Promise<T> {
    try {
      this.#begin();
      return Promise.resolve(work());
    } catch (error) {
      // A failed statement is undone on its own; the transaction and the other writes in it go on.
      return Promise.reject(mapped(error));
    }
  }

  /** Resolves once every write made so far is committed; rejects (BackendUnavailableError) if it could not be. */
  committed(): Promise<void> {
    return this.#commit ?? Promise.resolve();
  }

  /** Commits what is pending now (before closing); throws if the commit fails. */
  flush(): void {
    if (this.#db.isOpen && this.#db.isTransaction) this.#end();
  }

  #begin(): void {
    if (this.#db.isTransaction) return;
    this.#db.exec('BEGIN IMMEDIATE');
    const commit = new Promise<void>((resolve, reject) => {
      setImmediate(() => {
        try {
          if (this.#db.isOpen && this.#db.isTransaction) this.#end();
          resolve();
        } catch (error) {
          reject(error);
        }
      });
    });
    // A failed commit is reported to whoever awaits committed(); nobody else needs to hear of it.
    commit.catch(() => undefined);
    this.#commit = commit;
  }

  #end(): void {
    this.#commit = undefined;
    try {
      this.#db.exec('COMMIT');
    } catch (error) {
      try {
        if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      } catch {
        // The connection is unusable; the writes are not stored either way.
      }
      throw mapped(error);
    }
  }
}

/** A write refused by a UNIQUE constraint (of `column`, e.g. `users.email`, when given). */
export function isUniqueViolation(error: unknown, column = ''): boolean {
  return error instanceof Error && error.message.includes(`UNIQUE constraint failed: ${column}`);
}

/** Runs `work`, turning SQLite I/O failures (disk gone, file locked too long, closed) into the storage error the HTTP layer maps to 503. */
export function guard<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw mapped(error);
  }
}

function mapped(error: unknown): unknown {
  if (error instanceof Error && /SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|READONLY)|database is (locked|closed)|not open|statement has been finalized/i.test(error.message)) {
    return new BackendUnavailableError(`SQLite store unavailable: ${error.message}`, { cause: error });
  }
  return error;
}
