import { createHash, randomBytes } from 'node:crypto';

import type { Context } from 'koa';
import type { Provider } from 'oidc-provider';

import { ENGINE_ROUTES, INTERACTION_PATH } from '../engine/routes.ts';
import { sessionIdInCookie } from '../engine/session_renewal.ts';
import { systemClock } from '../shared/clock.ts';
import { CALLBACK_PATH, SETTINGS_CLIENT_ID, SETTINGS_PATH, SETTINGS_SCOPE, SIGNED_OUT_COOKIE, type SignedOutReason } from '../clients/first_party.ts';
import type { RenewedSessions } from './renewed_sessions.ts';

/**
 * Binds the callback to the browser that set out to sign in, and says where to return: one entry
 * per sign-in under way, so that each tab that set out (a page asked for in one, the home in
 * another) returns where it started, whichever signs in first.
 */
const STATE_COOKIE = 'settings_sign_in';
/** As long as a login page may stay open (LIFETIMES.Interaction). */
const STATE_MAX_AGE_MS = 10 * 60 * 1000;
/** The sign-ins under way one browser's cookie keeps, the newest: a few tabs' worth. */
const MAX_PENDING = 5;
/** Pages a sign-in may return to: the settings area's own pages (an invitation link's too), nothing else (no open redirect). */
const RETURNABLE = /^\/settings(?:\/password|\/workspaces\/[A-Za-z0-9_-]{1,64}(?:\/members)?|\/invitations\/[A-Za-z0-9_-]{43})?$/;

interface SignInState {
  state: string;
  /** The settings page to return to, relative to the issuer. */
  next: string;
  /** When it set out (ms since the epoch): an entry older than STATE_MAX_AGE_MS is dropped. */
  at: number;
}

/**
 * Signing in to the settings area (see src/clients/first_party.ts for why this way): a visitor without a
 * session is sent to the authorization endpoint as the settings client, signs in on the login
 * page, and comes back to the callback, by which time the engine has set its session cookie.
 */
export class SettingsSignIn {
  readonly #provider: Provider;
  readonly #issuer: string;
  readonly #basePath: string;
  readonly #renewedSessions: RenewedSessions;

  constructor(provider: Provider, issuer: string, basePath: string, renewedSessions: RenewedSessions) {
    this.#provider = provider;
    this.#issuer = issuer;
    this.#basePath = basePath;
    this.#renewedSessions = renewedSessions;
  }

  /**
   * Sends the browser to sign in, to come back to `ctx.path` (or the settings home). A browser
   * whose session cookie names a session that ended is told on the login page that it was signed
   * out, and why when a password change did it.
   */
  async start(ctx: Context): Promise<void> {
    const signedOut = await this.#signedOut(ctx);
    const noticeOptions = { ...this.#cookieOptions(signedOut ? STATE_MAX_AGE_MS : 0), path: `${this.#basePath}${INTERACTION_PATH}` };
    ctx.cookies.set(SIGNED_OUT_COOKIE, signedOut ?? null, noticeOptions);
    const page = ctx.path.slice(this.#basePath.length);
    const signIn: SignInState = { state: randomBytes(16).toString('base64url'), next: RETURNABLE.test(page) ? page : SETTINGS_PATH, at: systemClock() };
    this.#writeStates(ctx, [...this.#readStates(ctx).slice(1 - MAX_PENDING), signIn]);
    const url = new URL(`${this.#issuer}${ENGINE_ROUTES.authorization}`);
    url.search = new URLSearchParams({
      client_id: SETTINGS_CLIENT_ID,
      response_type: 'code',
      redirect_uri: `${this.#issuer}${CALLBACK_PATH}`,
      scope: SETTINGS_SCOPE,
      state: signIn.state,
      // PKCE is required of every client; the code is never redeemed, so the verifier is not kept.
      code_challenge: createHash('sha256').update(randomBytes(32)).digest('base64url'),
      code_challenge_method: 'S256',
    }).toString();
    ctx.status = 303;
    ctx.redirect(url.href);
  }

  /**
   * The authorization response. The code it carries is deleted unredeemed (the session, set by
   * now, is all the settings area needs), whatever else happens. Resolves where to send the browser
   * next, or undefined when the response is not one this browser asked for (or carries an error).
   */
  async finish(ctx: Context): Promise<string | undefined> {
    const { code, state, error } = ctx.query;
    if (typeof code === 'string') await this.#discard(code);
    const pending = this.#readStates(ctx);
    const expected = typeof state === 'string' ? pending.find((signIn) => signIn.state === state) : undefined;
    // The other sign-ins under way (other tabs) stay.
    this.#writeStates(ctx, pending.filter((signIn) => signIn !== expected));
    if (!expected || error !== undefined || typeof code !== 'string') return undefined;
    return `${this.#basePath}${expected.next}`;
  }

  /** Why the browser is not signed in, when its session cookie names a session that ended; undefined for one that never was (no cookie, or a session no one signed in to). */
  async #signedOut(ctx: Context): Promise<SignedOutReason | undefined> {
    const sessionId = sessionIdInCookie(this.#provider, ctx);
    if (sessionId === undefined || await this.#provider.Session.find(sessionId)) return undefined;
    return await this.#renewedSessions.endedByPasswordChange(sessionId) ? 'password-changed' : 'session-ended';
  }

  async #discard(code: string): Promise<void> {
    const found = await this.#provider.AuthorizationCode.find(code, { ignoreExpiration: true });
    if (found?.clientId === SETTINGS_CLIENT_ID) await found.destroy();
  }

  /** The sign-ins under way that the cookie holds, still fresh, each returning to a page RETURNABLE allows (checked again: no open redirect). */
  #readStates(ctx: Context): SignInState[] {
    const value = ctx.cookies.get(STATE_COOKIE, { signed: true });
    if (!value) return [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(value, 'base64url').toString());
    } catch {
      return [];
    }
    const oldest = systemClock() - STATE_MAX_AGE_MS;
    return (Array.isArray(parsed) ? parsed : []).filter((entry): entry is SignInState => {
      const { state, next, at } = (entry ?? {}) as Partial<SignInState>;
      return typeof state === 'string' && typeof next === 'string' && RETURNABLE.test(next) && typeof at === 'number' && at > oldest;
    }).slice(-MAX_PENDING);
  }

  #writeStates(ctx: Context, states: SignInState[]): void {
    if (states.length === 0) ctx.cookies.set(STATE_COOKIE, null, this.#cookieOptions(0));
    else ctx.cookies.set(STATE_COOKIE, Buffer.from(JSON.stringify(states)).toString('base64url'), this.#cookieOptions(STATE_MAX_AGE_MS));
  }

  #cookieOptions(maxAge: number) {
    return { signed: true, httpOnly: true, sameSite: 'lax' as const, path: `${this.#basePath}${SETTINGS_PATH}`, maxAge, overwrite: true };
  }
}
