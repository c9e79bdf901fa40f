import type { Context } from 'koa';

import { AccountError, UnusablePassword, type Accounts } from '../accounts/accounts.ts';
import type { UserAccess } from '../engine/user_access.ts';
import type { SignIns } from '../rate_limits/limits.ts';
import type { SignInRefusal } from '../rate_limits/sign_ins.ts';
import { inWords } from '../shared/words.ts';
import type { RenewedSessions } from './renewed_sessions.ts';
import type { User } from '../../adapters/store.ts';

/** The form's fields, as the page names them. */
export type PasswordField = 'current' | 'next' | 'confirmation';

/** Why the password was not changed: the field to fix, in words, and the page's status. */
export interface PasswordRefusal {
  status: 400 | 429;
  field: PasswordField;
  error: string;
  /** Seconds, with 429 (Retry-After). */
  retryAfter?: number;
}

/**
 * A user changing their own password in the settings area: the current one is checked as a
 * sign-in is (the same limits and locks, so a browser left signed in cannot be used to guess it),
 * the new one as the accounts check every password; then every other session of the user ends,
 * on every instance (the engine reads sessions from the store), and this one stays signed in (the
 * router then gives it a new id: src/engine/session_renewal.ts).
 * Applications the user allowed keep their access: their grants are not sessions.
 */
export class PasswordChange {
  readonly #accounts: Accounts;
  readonly #userAccess: UserAccess;
  readonly #signIns: SignIns;
  readonly #renewedSessions: RenewedSessions;

  constructor({ accounts, userAccess, signIns, renewedSessions }: { accounts: Accounts; userAccess: UserAccess; signIns: SignIns; renewedSessions: RenewedSessions }) {
    this.#accounts = accounts;
    this.#userAccess = userAccess;
    this.#signIns = signIns;
    this.#renewedSessions = renewedSessions;
  }

  /**
   * Changes the password, or says which field to fix; `sessionId` is the session that stays. `ctx`
   * is the request's: its address is counted, and its browser may be a known device of the user
   * (src/rate_limits/known_devices.ts).
   */
  async change(user: User, sessionId: string, body: Record<string, unknown>, ctx: Context): Promise<PasswordRefusal | undefined> {
    const field = (name: string): string => {
      const value = body[name];
      return typeof value === 'string' ? value : '';
    };
    const [current, next, confirmation] = [field('current_password'), field('new_password'), field('confirm_password')];
    if (!current) return { status: 400, field: 'current', error: 'Type your current password.' };
    // Said to the user themselves, in sentences: "your email address".
    const problem = this.#accounts.newPasswordProblem(next, user, { workspaceNames: await this.#accounts.workspaceNamesOf(user.id), told: 'user' });
    if (problem) return { status: 400, field: 'next', error: problem };
    if (next !== confirmation) return { status: 400, field: 'confirmation', error: 'The new password and its confirmation differ: type the same new password in both fields.' };

    // The browser is remembered as a known device once the password is what it will be: a known
    // device's entry is bound to the password, and a change ends every other browser's.
    const outcome = await this.#signIns.attempt(user.email, ctx, () => this.#accounts.authenticate(user.email, current), { rememberLater: true });
    if (outcome.refused) return { status: 429, field: 'current', error: passwordNotChecked(outcome.refused), retryAfter: outcome.refused.retryAfter };
    if (outcome.user?.id !== user.id) return { status: 400, field: 'current', error: 'Your current password is not right, so nothing was changed.' };
    const refusal = await this.#set(user, sessionId, current, next);
    await outcome.remember?.();
    return refusal;
  }

  /** Sets the new password, the current one having been checked: ends the user's other sessions. */

  async #set(user: User, sessionId: string, current: string, next: string): Promise<PasswordRefusal | undefined> {
    // Passwords are one whatever Unicode form they were typed in (hashed composed).
    if (next.normalize('NFC') === current.normalize('NFC')) return { status: 400, field: 'next', error: 'The new password is the one you have now, so nothing was changed. Choose another.' };
    try {
      // Checked again as it is set, in the same words: the user may have joined a workspace since.
      await this.#accounts.setPassword(user.id, next, { told: 'user' });
    } catch (error) {
      if (error instanceof UnusablePassword) return { status: 400, field: 'next', error: error.message };
      if (error instanceof AccountError) return { status: 400, field: 'next', error: `The password was not changed: ${error.message}.` };
      throw error;
    }
    // Each other browser, sent to sign in at its next page, is told why.
    await this.#userAccess.endSessions(user.id, sessionId, (ended) => this.#renewedSessions.recordEnded(ended));
    return undefined;
  }
}

/**
 * A sign-in limit's refusal in the words of this page: the user is changing their password, not
 * signing in, though the failures counted are those of both forms (a lock speaks of either).
 */
function passwordNotChecked({ limit, retryAfter }: SignInRefusal): string {
  const wait = inWords(retryAfter);
  switch (limit) {
    case 'account':
      return `Too many attempts with your password have failed, here or on the sign-in page, so checking it is paused for ${wait}. Your password was not changed; try again after that.`;
    case 'address':
      return `Too many password attempts from your network have failed, so checking passwords from it is paused for ${wait}. Your password was not changed; try again after that.`;
    case 'concurrent':
      return 'Too many checks of your password are under way at once. Your password was not changed; try again in a moment.';
  }
}
