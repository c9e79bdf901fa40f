import { hash } from 'node:crypto';

import type { ModelStore } from '../../adapters/store.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { sessionStoreId } from '../engine/user_access.ts';

/** As long as a page may stay open for its form to be sent again (a login page's lifetime). */
const MARK_SECONDS = LIFETIMES.Interaction;
/** As long as an ended session's cookie may still come back: the longest a session lives. */
const ENDED_MARK_SECONDS = LIFETIMES.Session;

/**
 * The sessions a password change gave a new id (src/engine/session_renewal.ts), by their old id,
 * and those it ended (every other browser signed in as the user), by their store id.
 *
 * The password form sent twice (a double click without JavaScript, a retry) sends the second
 * copy with the old id, which the browser still holds when the first answer, the one with the new
 * id, was dropped: that copy finds the browser signed out by its own password change, and is told
 * so, not sent to a sign-in page that says nothing. A page opened in another browser whose session
 * the change ended is sent to sign in, told why. Kept in the store, so every instance knows it.
 */
export class RenewedSessions {
  readonly #marks: ModelStore;

  constructor(marks: ModelStore) {
    this.#marks = marks;
  }

  /** Records that the session is about to be renewed by a password change. */
  async record(sessionId: string): Promise<void> {
    await this.#marks.upsert(markId(sessionId), { kind: 'RenewedSession' }, MARK_SECONDS);
  }

  /** Records that a password change is about to end these sessions (their store ids, as UserAccess.endSessions names them). */
  async recordEnded(storeIds: readonly string[]): Promise<void> {
    await Promise.all(storeIds.map((storeId) => this.#marks.upsert(endedMarkId(storeId), { kind: 'EndedSession' }, ENDED_MARK_SECONDS)));
  }

  /** Whether a password change renewed the session (recently: within MARK_SECONDS). */
  async renewed(sessionId: string | undefined): Promise<boolean> {
    return sessionId !== undefined && await this.#marks.find(markId(sessionId)) !== undefined;
  }

  /** Whether a password change renewed or ended the session: the browser holding its cookie was signed out by it. */
  async endedByPasswordChange(sessionId: string): Promise<boolean> {
    if (await this.renewed(sessionId)) return true;
    return await this.#marks.find(endedMarkId(sessionStoreId(sessionId))) !== undefined;
  }
}

/** A digest: the old id is not stored where a copy of it could be read. */
function markId(sessionId: string): string {
  return hash('sha256', `renewed-session\n${sessionId}`, 'base64url');
}

function endedMarkId(storeId: string): string {
  return hash('sha256', `password-ended-session\n${storeId}`, 'base64url');
}
