import type { DatabaseSync, StatementSync } from 'node:sqlite';

import { systemClock } from '../../src/shared/clock.ts';
import { BackendUnavailableError } from '../store.ts';

/**
 * How long a write waits for another process's transaction (another worker, the admin CLI) before
 * the store counts as unavailable.
 */
const LOCK_WAIT_MS = 5000;

/**
 * Between tries for the write lock, in milliseconds, the last repeated; 0 is the end of this
 * event-loop turn. A worker holds the lock for one of its turns at most, so the first tries come
 * soon.
 */
const LOCK_RETRY_DELAYS_MS = [0, 0, 1, 2, 4, 5];

/** SQLite's busy wait off for a try at the lock, and back on for everything else. */
const BUSY_WAIT_OFF = 'PRAGMA busy_timeout = 0';
export const BUSY_WAIT_ON = `PRAGMA busy_timeout = ${LOCK_WAIT_MS}`;

/**
 * How long after a write last found the lock taken this connection keeps its transactions short.
 * Under the load that made it wait, the other process keeps finding the lock taken too.
 */
const CONTENDED_MS = 10_000;

export class SqliteConnection {
  readonly #db: DatabaseSync;
  readonly #statements = new Map<string, StatementSync>();
  /** Settles when the open transaction has committed; undefined when none is open. */
  #commit: Promise<void> | undefined;
  /** Writes waiting, in order, for the write lock another process holds. */
  readonly #waiting: Array<{ start: () => void; fail: (error: unknown) => void }> = [];
  /** Until when (clock milliseconds) transactions commit as soon as the writes before them settle. */
  #contendedUntil = 0;

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

  /**
   * Runs `work` in the open transaction, opening one if none is. While another process holds the
   * write lock the work waits its turn without holding up this process: SQLite's own busy wait
   * would stop the event loop, and with it every request this process serves, reads included.
   *
   * A transaction groups the writes of one event-loop turn, one commit for them all. While other
   * processes write to the same file (workers), it groups only the writes that follow each other
   * without waiting on I/O, and commits when they have run: holding the lock for a whole turn,
   * the work of every request in it, would keep the other processes from writing meanwhile.
   */
  write<T>(work: () => T): Promise<T> {
    try {
      if (this.#waiting.length === 0 && this.#tryBegin()) return this.#run(work);
    } catch (error) {
      return Promise.reject(mapped(error));
    }
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push({ start: () => this.#run(work).then(resolve, reject), fail: reject });
      if (this.#waiting.length === 1) this.#retryLater(systemClock(), 0);
    });
  }

  /**
   * As write, for work of several statements that must all stay or all go: a failed statement
   * undoes the ones before it too (a savepoint), where write undoes only the statement that failed.
   */
  writeAtomically<T>(work: () => T): Promise<T> {
    return this.write(() => {
      this.statement('SAVEPOINT atomic_write').run();
      try {
        const result = work();
        this.statement('RELEASE atomic_write').run();
        return result;
      } catch (error) {
        this.statement('ROLLBACK TO atomic_write').run();
        this.statement('RELEASE atomic_write').run();
        throw error;
      }
    });
  }

  /**
   * As write, for deleting what a person asked to be erased (a record, a user, a workspace): the
   * whole pages it frees are zeroed too (`secure_delete` ON), not only what it frees within the
   * pages it rewrites anyway (FAST, the connection's setting, which costs no I/O), so a copy of the
   * file holds nothing of it once the deletion is checkpointed. Only WAL frames written before the
   * deletion may still hold it, until the WAL is written over.
   */
  erase<T>(work: () => T): Promise<T> {
    return this.write(() => {
      this.statement('PRAGMA secure_delete = ON').run();
      try {
        return work();
      } finally {
        this.statement('PRAGMA secure_delete = FAST').run();
      }
    });
  }

  /** Resolves once every write made so far is committed; rejects (BackendUnavailableError) if it could not be. */
  committed(): Promise<void> {
    return this.#commit ?? Promise.resolve();
  }

  /** Commits what is pending now (before closing); throws if the commit fails. */
  flush(): void {
    if (this.#db.isOpen && this.#db.isTransaction) this.#end();
  }

  #run<T>(work: () => T): Promise<T> {
    try {
      return Promise.resolve(work());
    } catch (error) {
      // A failed statement is undone on its own; the transaction and the other writes in it go on.
      return Promise.reject(mapped(error));
    }
  }

  #retryLater(since: number, attempt: number): void {
    const delay = LOCK_RETRY_DELAYS_MS[Math.min(attempt, LOCK_RETRY_DELAYS_MS.length - 1)]!;
    const retry = () => {
      let begun: boolean;
      try {
        begun = this.#tryBegin();
      } catch (error) {
        this.#failWaiting(mapped(error));
        return;
      }
      if (begun) {
        for (const { start } of this.#waiting.splice(0)) start();
      } else if (systemClock() - since >= LOCK_WAIT_MS) {
        this.#failWaiting(new BackendUnavailableError(`SQLite store unavailable: another process held the database's write lock for ${LOCK_WAIT_MS} ms`));
      } else {
        this.#retryLater(since, attempt + 1);
      }
    };
    if (delay === 0) setImmediate(retry);
    else setTimeout(retry, delay);
  }

  #failWaiting(error: unknown): void {
    for (const { fail } of this.#waiting.splice(0)) fail(error);
  }

  /** Opens a transaction unless one is open; false when another process holds the write lock. */
  #tryBegin(): boolean {
    if (this.#db.isTransaction) return true;
    if (!this.#lockWithoutWaiting()) {
      this.#contendedUntil = systemClock() + CONTENDED_MS;
      return false;
    }
    const commit = new Promise<void>((resolve, reject) => {
      const commitNow = () => {
        try {
          if (this.#db.isOpen && this.#db.isTransaction) this.#end();
          resolve();
        } catch (error) {
          reject(error);
        }
      };
      if (systemClock() < this.#contendedUntil) afterPendingPromises(commitNow);
      else setImmediate(commitNow);
    });
    // A failed commit is reported to whoever awaits committed(); nobody else needs to hear of it.
    commit.catch(() => undefined);
    this.#commit = commit;
    return true;
  }

  /** BEGIN IMMEDIATE with SQLite's busy wait off for it alone; the wait stays on for everything else. */
  #lockWithoutWaiting(): boolean {
    this.statement(BUSY_WAIT_OFF).run();
    try {
      this.#db.exec('BEGIN IMMEDIATE');
      return true;
    } catch (error) {
      if (isBusy(error)) return false;
      throw error;
    } finally {
      this.statement(BUSY_WAIT_ON).run();
    }
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

/**
 * Runs `task` once the promise callbacks queued now, and those they queue in turn, have run: after
 * the writes that a request makes one after another without waiting on I/O. A tick queued from a
 * promise callback runs only once Node has run every queued promise callback.
 */
function afterPendingPromises(task: () => void): void {
  queueMicrotask(() => process.nextTick(task));
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

const SQLITE_BUSY = 5;

/** SQLite's primary result code of an error (its extended code without the extension), if it has one. */
function primaryCode(error: unknown): number | undefined {
  const code = (error as { errcode?: unknown } | null)?.errcode;
  return typeof code === 'number' ? code & 0xff : undefined;
}

/** SQLITE_BUSY, or one of its extended codes: another connection holds the lock. */
function isBusy(error: unknown): boolean {
  return primaryCode(error) === SQLITE_BUSY;
}

/**
 * SQLite's primary result codes for a store that cannot be read or written now, whatever the
 * request: BUSY, LOCKED, READONLY (a file remounted read-only), IOERR, FULL (the disk), CANTOPEN.
 */
const UNAVAILABLE_CODES = new Set([5, 6, 8, 10, 13, 14]);

/**
 * SQLite's failures of the store rather than of the request, as the storage error the HTTP layer
 * answers with 503. node:sqlite says them in SQLite's words ("database or disk is full") with the
 * code in `errcode` alone; its own errors (a closed database) by their message.
 */
function mapped(error: unknown): unknown {
  const code = primaryCode(error);
  const unavailable = code !== undefined && UNAVAILABLE_CODES.has(code);
  if (error instanceof Error && (unavailable || /database is (locked|closed)|not open|statement has been finalized/i.test(error.message))) {
    return new BackendUnavailableError(`SQLite store unavailable: ${error.message}`, { cause: error });
  }
  return error;
}
