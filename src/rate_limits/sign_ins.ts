import type { Context } from 'koa';

import { foldEmail, normalEmail } from '../../adapters/store.ts';
import type { RateLimits } from '../../config/index.ts';
import type { Logger } from '../shared/logger.ts';
import { addressKey } from './addresses.ts';
import type { Counter, Counters } from './counter.ts';
import type { KnownDevices } from './known_devices.ts';
import { inWords } from '../shared/words.ts';

/** The sign-in form's refusal: the page is shown again with 429, `Retry-After` and this message. */
export interface SignInRefusal {
  retryAfter: number;
  message: string;
  /** Which limit refused: a form that checks a password but is no sign-in (a password change) says so in its own words. */
  limit: SignInLimit;
}

/** The account locked, the address past its failures, or too many checks of the account at once. */
export type SignInLimit = 'account' | 'address' | 'concurrent';

/** What a password check found: the user whose password it was, and whose email it named, if anyone's. */
export interface PasswordCheck<User> {
  user?: User;
  /** The id of the user the email names, whether or not the password was theirs: what the log names. */
  accountId?: string;
}

export interface SignInOutcome<User> {
  /** The user whose password it was. */
  user?: User;
  /** Not checked, or checked and now locked: the form says why and for how long. */
  refused?: SignInRefusal;
  /**
   * With `rememberLater`, once the password was right: makes the browser a known device of the
   * account under its credential as it is when called (a password change calls it once the new
   * password is set, or was refused).
   */
  remember?: () => Promise<void>;
}

export interface AttemptOptions {
  /** The caller changes the credential after the check: the browser is remembered when it calls the outcome's `remember`. */
  rememberLater?: boolean;
}

/** Consecutive failures are forgotten this long after the first of them (a fixed window), or at a successful sign-in. */
const FAILURES_KEPT_SECONDS = 24 * 3600;
/**
 * Password checks of one account at the same moment: more than any person (or a conformance run
 * of a dozen flows at once) makes, few enough that a burst from many addresses cannot have
 * thousands of guesses checked before the first failures lock the account.
 */
const CONCURRENT_CHECKS_PER_ACCOUNT = 20;
/** Password checks from one known device at the same moment: as many as an account's, and counted apart from them. */
const CONCURRENT_CHECKS_PER_DEVICE = CONCURRENT_CHECKS_PER_ACCOUNT;
/** How long a check may be counted as under way (a process that dies mid-check leaves its count this long). */
const CHECK_SECONDS = 60;

interface Admitted {
  /** The account (or the known device) had failed often enough to be locked before: this attempt holds the lock key. */
  gated: boolean;
}

/**
 * Password sign-ins, against guessing:
 * - per address (an IPv6 network counts as one: addresses.ts), at most RATE_LIMIT_LOGIN_ADDRESS
 *   failed sign-ins a window (attempts under way included); past them every sign-in from that
 *   address is refused until the window ends;
 * - per account (the email as typed, trimmed and lower-cased, whether or not such a user exists),
 *   after RATE_LIMIT_LOGIN_ACCOUNT consecutive failures the account is locked for
 *   RATE_LIMIT_LOGIN_LOCK, and each further failure locks it twice as long, up to
 *   RATE_LIMIT_LOGIN_LOCK_MAX. While locked no password is checked, the right one included; once
 *   the lock lifts, one attempt at a time is let through until one succeeds, which clears the count;
 * - per account, at most CONCURRENT_CHECKS_PER_ACCOUNT checks at once.
 * - a known device (a browser that signed in to the account before: known_devices.ts) is counted
 *   apart from the account, by its device id, with the same rules: its consecutive failures lock
 *   that device (RATE_LIMIT_LOGIN_ACCOUNT of them, the same lock and doubling, one attempt at a
 *   time once it lifts), its checks at once are its own, and the account's failures, lock and
 *   checks under way neither hold it back nor are touched by it. So a lock someone else's guesses
 *   keep on an account never keeps its owner out of the browsers they use, and a stolen device
 *   cookie buys RATE_LIMIT_LOGIN_ACCOUNT guesses before its own lock. A success from a known device
 *   clears that device's failures only: the account's, which the guesser's failures are, stay,
 *   else each sign-in of the owner would give the guesser a fresh allowance. The per-address
 *   limit holds for every attempt, known device or not.
 * The refusal reads the same whether or not the account exists, and for a known device as for the
 * account. Every failure and lock is logged with the address and the id of the user the email
 * names, never what was typed: a password typed into the email field would be logged otherwise.
 * A refusal, which checks nothing, names the address. A known device's lines say so
 * (`known_device: true`), never its id.
 */
export class SignIns {
  readonly #logger: Logger;
  readonly #devices: KnownDevices;
  readonly #guard: Guard | undefined;

  constructor(limits: RateLimits | undefined, counters: Counters, logger: Logger, devices: KnownDevices) {
    this.#logger = logger;
    this.#devices = devices;
    this.#guard = limits && {
      limits,
      perAddress: counters.counter({ name: 'login-address', ...limits.loginPerAddress }),
      account: {
        checking: counters.counter({ name: 'login-checking', points: CONCURRENT_CHECKS_PER_ACCOUNT, duration: CHECK_SECONDS }),
        failures: counters.counter({ name: 'login-failures', points: limits.loginFailuresBeforeLock, duration: FAILURES_KEPT_SECONDS }),
        locks: counters.counter({ name: 'login-lock', points: 1, duration: limits.loginLockMax }),
      },
      device: {
        checking: counters.counter({ name: 'login-device-checking', points: CONCURRENT_CHECKS_PER_DEVICE, duration: CHECK_SECONDS }),
        failures: counters.counter({ name: 'login-device-failures', points: limits.loginFailuresBeforeLock, duration: FAILURES_KEPT_SECONDS }),
        locks: counters.counter({ name: 'login-device-lock', points: 1, duration: limits.loginLockMax }),
      },
    };
  }

  /**
   * Checks the password with `authenticate` unless the address, or the account (or, from a known
   * device of the account, that device) may not sign in now; on success the browser is made (or
   * kept) a known device of the account (with `rememberLater`, once the caller says). The request's
   * address is logged as given and counted as addressKey() reads it (an IPv6 network is one address).
   */
  async attempt<User>(email: string, ctx: Context, authenticate: () => Promise<PasswordCheck<User>>, options: AttemptOptions = {}): Promise<SignInOutcome<User>> {
    const clientAddress = ctx.ip;
    // One lock an account: the email as the store tells accounts apart, so two accounts never share one.
    const account = foldEmail(normalEmail(email));
    const guard = this.#guard;
    const device = guard && await this.#devices.deviceOf(ctx, email, account);
    // A known device is counted under its id, the account under its email: each with its own counters.
    const scope: Scope | undefined = guard && (device === undefined ? { guard, locks: guard.account, key: account } : { guard, locks: guard.device, key: device });
    const known = device === undefined ? {} : { known_device: true };
    const address = guard ? addressKey(clientAddress, guard.limits.ipv6Prefix) : clientAddress;
    const admitted = scope ? await admit(scope, address) : { gated: false };
    if ('refused' in admitted) {
      this.#logger.warn('sign-in refused', { ip: clientAddress, reason: admitted.refused.limit, retry_after: admitted.refused.retryAfter, ...known });
      return { refused: admitted.refused };
    }
    let user: User | undefined;
    let accountId: string | undefined;
    try {
      ({ user, accountId } = await authenticate());
    } catch (error) {
      // Nothing was decided (the store did not answer): the attempt is not counted.
      if (scope) await settle(scope, address, admitted, 'undone');
      throw error;
    }
    if (user) {
      if (!scope) return { user };
      await settle(scope, address, admitted, 'succeeded');
      const remember = () => this.#devices.remember(ctx, email, account, device);
      if (options.rememberLater) return { user, remember };
      await remember();
      return { user };
    }
    const logged = { user_id: accountId, ip: clientAddress, ...known };
    const failures = scope && await settle(scope, address, admitted, 'failed');
    this.#logger.warn('sign-in failed', { ...logged, ...(failures ? { failures } : {}) });
    const lock = scope && failures && await lockAfterFailure(scope, failures);
    if (!lock) return {};
    this.#logger.warn('sign-in locked', { ...logged, seconds: lock });
    return { refused: accountLocked(lock) };
  }
}

/** The counters, when limits are on. */
interface Guard {
  limits: RateLimits;
  /** Failed sign-ins per address, and those under way. */
  perAddress: Counter;
  /** Per account (the email), for every browser that is no known device of it. */
  account: Locks;
  /** Per known device (its id), for its attempts at the account its cookie binds it to. */
  device: Locks;
}

/** What is counted per account, or per known device. */
interface Locks {
  /** Checks under way. */
  checking: Counter;
  /** Consecutive failures. */
  failures: Counter;
  /** Held while locked, and taken by the one attempt let through once a lock has lifted. */
  locks: Counter;
}

/** Whose counts an attempt is under: the account's (`key` the email) or a known device's (`key` its id). */
interface Scope {
  guard: Guard;
  locks: Locks;
  key: string;
}

type Admission = Admitted | { refused: SignInRefusal };

async function admit({ guard, locks: { checking, failures: failed, locks }, key }: Scope, ip: string): Promise<Admission> {
  const addressWait = await guard.perAddress.take(ip);
  if (addressWait !== undefined) return { refused: addressLimited(addressWait) };
  const busy = await checking.take(key);
  if (busy !== undefined) {
    await Promise.all([guard.perAddress.giveBack(ip), checking.giveBack(key)]);
    return { refused: accountBusy() };
  }
  const failures = await failed.count(key);
  const gated = failures >= guard.limits.loginFailuresBeforeLock;
  // Past the threshold an attempt must take the lock key itself, which it can only once the lock
  // has lifted, and which makes it the one attempt in flight; below it, a lock left from before
  // the count was forgotten still holds.
  const lockWait = gated
    ? await locks.takeOnly(key, lockSeconds(guard.limits, failures + 1))
    : await locks.secondsLeft(key);
  if (lockWait === undefined) return { gated };
  await Promise.all([guard.perAddress.giveBack(ip), checking.giveBack(key)]);
  return { refused: accountLocked(lockWait) };
}

/**
 * After the password check. A success clears the scope's failures (and the lock key it took: the
 * account's, or the known device's only) and does not count against the address; a failure is
 * counted for both (the scope's count is the answer); an attempt that decided nothing is taken back.
 */
async function settle({ guard, locks: { checking, failures, locks }, key }: Scope, ip: string, admitted: Admitted, how: 'succeeded' | 'failed' | 'undone'): Promise<number> {
  const [count] = await Promise.all([
    how === 'succeeded' ? failures.forget(key).then(() => 0) : how === 'failed' ? failures.add(key) : 0,
    how === 'failed' ? undefined : guard.perAddress.giveBack(ip),
    checking.giveBack(key),
    admitted.gated && how !== 'failed' ? locks.forget(key) : undefined,
  ]);
  return count;
}

/** After the `failures`th consecutive failure: locks the account (or the known device) once that is enough; the lock's seconds. */
async function lockAfterFailure({ guard, locks: { locks }, key }: Scope, failures: number): Promise<number | undefined> {
  if (failures < guard.limits.loginFailuresBeforeLock) return undefined;
  const seconds = lockSeconds(guard.limits, failures);
  await locks.hold(key, seconds);
  return seconds;
}

/** The lock after the `failures`th consecutive failure: the first lock, doubled for each failure since, up to the longest. */
function lockSeconds({ loginLock, loginLockMax, loginFailuresBeforeLock }: RateLimits, failures: number): number {
  const doublings = Math.min(failures - loginFailuresBeforeLock, 32);
  return Math.min(loginLock * 2 ** doublings, loginLockMax);
}

/** The same words whether or not an account has this email: only what was typed is named. */
function accountLocked(seconds: number): SignInRefusal {
  return {
    retryAfter: seconds,
    message: `Too many sign-in attempts with this email address have failed, so signing in with it is paused for ${inWords(seconds)}. Try again after that.`,
    limit: 'account',
  };
}

/** Many checks of one email at once: a burst, not a person; named by what was typed only. */
function accountBusy(): SignInRefusal {
  return { retryAfter: 1, message: 'Too many sign-in attempts with this email address are under way at once. Try again in a moment.', limit: 'concurrent' };
}

function addressLimited(seconds: number): SignInRefusal {
  return {
    retryAfter: seconds,
    message: `Too many sign-in attempts from your network have failed, so signing in from it is paused for ${inWords(seconds)}. Try again after that.`,
    limit: 'address',
  };
}
