import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

import type { Context } from 'koa';

import { systemClock } from '../shared/clock.ts';

/** What the key the cookie's account bindings are keyed with is derived for (KeyRing.derivedKeys). */
export const KNOWN_DEVICES_PURPOSE = 'known device cookies';

const COOKIE = 'known_devices';
/** How long a browser stays a known device of an account after its last successful sign-in to it. */
export const KNOWN_DEVICE_DAYS = 180;
const MAX_AGE_MS = KNOWN_DEVICE_DAYS * 24 * 3600 * 1000;
/** The accounts one browser is a known device of, the latest signed in to: a shared computer's few people. */
const MAX_ACCOUNTS = 5;
/** More than MAX_ACCOUNTS entries ever take: a longer value is no cookie of this version's. */
const MAX_VALUE_LENGTH = 1024;
const DEVICE_ID = /^[A-Za-z0-9_-]{22}$/;

/** One account this browser signed in to: the device id it was given, bound to the account. */
interface Entry {
  /** The device id: 128 random bits, base64url. */
  id: string;
  /** The HMAC of the id and the account, keyed from the key-encryption key: names the account to no one. */
  of: string;
  /** When the browser last signed in to the account (ms since the epoch). */
  at: number;
}

/**
 * Known-device cookies (NIST SP 800-63B 5.2.2, OWASP's "device cookies"): a browser that signed in
 * to an account with its password carries a random device id for that account, which lets it be
 * checked while the account is locked against everyone else (sign_ins.ts). The cookie holds, for
 * each of the last MAX_ACCOUNTS accounts, the id, an HMAC binding it to the account (the email as
 * the sign-in locks tell accounts apart), never the email itself, and when it was last used; it is
 * signed with the cookie keys (Koa's signed cookies, which verify under an older key too). It is
 * no credential: it lets a browser guess a password, no more, and only as often as its own lock
 * allows. A cookie that does not verify, is too old, or binds no id to the account typed is as none.
 *
 * It is sent to the pages that check a password only: the sign-in form (under `/interaction`) and
 * the password change (`/settings/password`); one cookie at each path, written together.
 */
export class KnownDevices {
  /** Current first: a binding made under an older key-encryption key still holds. */
  readonly #keys: readonly Uint8Array[];
  readonly #paths: readonly string[];

  constructor(keys: readonly Uint8Array[], paths: readonly string[]) {
    this.#keys = keys;
    this.#paths = paths;
  }

  /** The device id the browser was given for `account`, when its cookie holds a valid one. */
  deviceOf(ctx: Context, account: string): string | undefined {
    return this.#read(ctx).find((entry) => this.#binds(entry, account))?.id;
  }

  /**
   * After a successful password check of `account`: the browser is a known device of it for
   * KNOWN_DEVICE_DAYS from now, under `id` when it was one already, else under a new id.
   */
  remember(ctx: Context, account: string, id: string = randomBytes(16).toString('base64url')): void {
    const others = this.#read(ctx).filter((entry) => entry.id !== id && !this.#binds(entry, account));
    const entries = [...others.slice(1 - MAX_ACCOUNTS), { id, of: binding(this.#keys[0]!, id, account), at: systemClock() }];
    const value = Buffer.from(JSON.stringify(entries.map(({ id, of, at }) => [id, of, at]))).toString('base64url');
    for (const path of this.#paths) {
      // Not overwrite: each path's cookie is a Set-Cookie of its own.
      ctx.cookies.set(COOKIE, value, { signed: true, httpOnly: true, sameSite: 'lax', path, maxAge: MAX_AGE_MS, overwrite: false });
    }
  }

  #binds(entry: Entry, account: string): boolean {
    const given = Buffer.from(entry.of);
    return this.#keys.some((key) => {
      const expected = Buffer.from(binding(key, entry.id, account));
      return expected.length === given.length && timingSafeEqual(expected, given);
    });
  }

  /** The cookie's entries still fresh; none when there is no cookie, or it does not verify or parse. */
  #read(ctx: Context): Entry[] {
    let value: string | undefined;
    try {
      value = ctx.cookies.get(COOKIE, { signed: true });
    } catch {
      // A Cookie header the cookie library cannot read: as no cookie.
      return [];
    }
    if (!value || value.length > MAX_VALUE_LENGTH) return [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(value, 'base64url').toString());
    } catch {
      return [];
    }
    const oldest = systemClock() - MAX_AGE_MS;
    const entries: Entry[] = [];
    for (const item of Array.isArray(parsed) ? parsed.slice(-MAX_ACCOUNTS) : []) {
      if (!Array.isArray(item)) continue;
      const [id, of, at] = item as unknown[];
      if (typeof id === 'string' && DEVICE_ID.test(id) && typeof of === 'string' && typeof at === 'number' && at > oldest) entries.push({ id, of, at });
    }
    return entries;
  }
}

function binding(key: Uint8Array, id: string, account: string): string {
  return createHmac('sha256', key).update(`${id}\n${account}`).digest('base64url').slice(0, 22);
}
