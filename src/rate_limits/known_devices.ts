import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

import type { Context } from 'koa';

import { systemClock } from '../shared/clock.ts';

/** What the key the cookie's entries are authenticated with is derived for (KeyRing.derivedKeys). */
export const KNOWN_DEVICES_PURPOSE = 'known device cookies';

const COOKIE = 'known_devices';
/** How long a browser stays a known device of an account after its last successful sign-in to it. */
export const KNOWN_DEVICE_DAYS = 180;
const MAX_AGE_MS = KNOWN_DEVICE_DAYS * 24 * 3600 * 1000;
/** The accounts one browser is a known device of, the latest signed in to: a shared computer's few people. */
const MAX_ACCOUNTS = 5;
/** More than MAX_ACCOUNTS entries ever take: a longer value is no cookie of this version's. */
const MAX_VALUE_LENGTH = 1024;
/** A moment of clock difference between instances: an entry made later than this from now is no entry of ours. */
const CLOCK_SKEW_MS = 60_000;
const DEVICE_ID = /^[A-Za-z0-9_-]{22}$/;
const MAC = /^[A-Za-z0-9_-]{22}$/;
const VALUE = /^[A-Za-z0-9_-]+$/;

/**
 * What an account's entries are bound to beside its email: a digest of its user's id and password
 * hash (Accounts.credentialStamp), so that a password change, or another user given the email,
 * leaves every entry made before unusable. Undefined when no user has the email.
 */
export type CredentialStamp = (email: string) => Promise<string | undefined>;

/** One account this browser signed in to, as the cookie holds it. */
interface Entry {
  /** The device id: 128 random bits, base64url. */
  id: string;
  /** The HMAC of the id, `at`, the account and its credential stamp, keyed from the key-encryption key: names the account to no one. */
  mac: string;
  /** When the browser last signed in to the account (ms since the epoch). */
  at: number;
}

/**
 * Known-device cookies (NIST SP 800-63B 5.2.2, OWASP's "device cookies"): a browser that signed in
 * to an account with its password carries a random device id for that account, which lets it be
 * checked while the account is locked against everyone else (sign_ins.ts). The cookie holds, for
 * each of the last MAX_ACCOUNTS accounts, the id, when it was last used, and an HMAC binding both
 * to the account (the email as the sign-in locks tell accounts apart) and to the account's
 * credential (CredentialStamp), never the email itself. Each entry authenticates itself, under the
 * current derived key or an older one, so an entry cannot be given a later time nor moved to
 * another account, and a password change ends every entry made before it. It is no credential: it
 * lets a browser guess a password, no more, and only as often as its own lock allows.
 *
 * Every `known_devices` value of the Cookie header is read (a page of a sibling host or another
 * port may plant one at a longer path, which the browser sends first): the valid entries of all
 * of them count. An entry that does not verify, is too old, or binds no id to the account typed
 * is as none.
 *
 * It is sent to the pages that check a password only: the sign-in form (under `/interaction`) and
 * the password change (`/settings/password`); one cookie at each path, written together.
 */
export class KnownDevices {
  /** Current first: an entry made under an older key-encryption key still verifies. */
  readonly #keys: readonly Uint8Array[];
  readonly #paths: readonly string[];
  readonly #stampOf: CredentialStamp;

  constructor(keys: readonly Uint8Array[], paths: readonly string[], stampOf: CredentialStamp) {
    this.#keys = keys;
    this.#paths = paths;
    this.#stampOf = stampOf;
  }

  /**
   * The device id the browser was given for `account` (the email as the locks fold it; `email` as
   * typed, for its user's credential stamp), when its cookies hold a valid one. The stamp is looked
   * up only when there is an entry to check.
   */
  async deviceOf(ctx: Context, email: string, account: string): Promise<string | undefined> {
    const entries = read(ctx);
    if (entries.length === 0) return undefined;
    const stamp = await this.#stampOf(email);
    if (stamp === undefined) return undefined;
    return entries.find((entry) => this.#binds(entry, account, stamp))?.id;
  }

  /**
   * After a successful password check of `account`: the browser is a known device of it, under
   * the account's credential as it is now, for KNOWN_DEVICE_DAYS from now, under `id` when it was
   * one already, else under a new id.
   */
  async remember(ctx: Context, email: string, account: string, id: string = randomBytes(16).toString('base64url')): Promise<void> {
    const stamp = await this.#stampOf(email);
    if (stamp === undefined) return;
    // The other accounts' entries, each id once, the latest signed in to kept.
    const others = new Map<string, Entry>();
    for (const entry of read(ctx).sort((a, b) => a.at - b.at)) {
      if (entry.id !== id && !this.#binds(entry, account, stamp)) others.set(entry.id, entry);
    }
    const at = systemClock();
    const entries = [...[...others.values()].sort((a, b) => a.at - b.at).slice(1 - MAX_ACCOUNTS), { id, mac: mac(this.#keys[0]!, id, at, account, stamp), at }];
    const value = Buffer.from(JSON.stringify(entries.map((entry) => [entry.id, entry.mac, entry.at]))).toString('base64url');
    for (const path of this.#paths) {
      // Not signed (Koa signs by default): each entry vouches for itself. Not overwrite: each path's cookie is a Set-Cookie of its own.
      ctx.cookies.set(COOKIE, value, { signed: false, httpOnly: true, sameSite: 'lax', path, maxAge: MAX_AGE_MS, overwrite: false });
    }
  }

  #binds(entry: Entry, account: string, stamp: string): boolean {
    const given = Buffer.from(entry.mac);
    return this.#keys.some((key) => timingSafeEqual(Buffer.from(mac(key, entry.id, entry.at, account, stamp)), given));
  }
}

function mac(key: Uint8Array, id: string, at: number, account: string, stamp: string): string {
  return createHmac('sha256', key).update(`${id}\n${at}\n${account}\n${stamp}`).digest('base64url').slice(0, 22);
}

/**
 * The well-formed, fresh entries of every `known_devices` value the request's Cookie header holds
 * (read from the header itself: Koa's cookies.get reads the first value only); none when there is
 * none. Bounded by the header's size (Node's limit) and, per value, by MAX_VALUE_LENGTH and
 * MAX_ACCOUNTS.
 */
function read(ctx: Context): Entry[] {
  const header = ctx.get('cookie');
  if (!header) return [];
  const now = systemClock();
  const entries: Entry[] = [];
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq >= 0 && pair.slice(0, eq).trim() === COOKIE) entries.push(...entriesOf(pair.slice(eq + 1).trim(), now));
  }
  return entries;
}

function entriesOf(value: string, now: number): Entry[] {
  if (value.length > MAX_VALUE_LENGTH || !VALUE.test(value)) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString());
  } catch {
    return [];
  }
  const entries: Entry[] = [];
  for (const item of Array.isArray(parsed) ? parsed.slice(-MAX_ACCOUNTS) : []) {
    if (!Array.isArray(item)) continue;
    const [id, of, at] = item as unknown[];
    if (typeof id === 'string' && DEVICE_ID.test(id) && typeof of === 'string' && MAC.test(of)
      && Number.isSafeInteger(at) && (at as number) > now - MAX_AGE_MS && (at as number) <= now + CLOCK_SKEW_MS) {
      entries.push({ id, mac: of, at: at as number });
    }
  }
  return entries;
}
