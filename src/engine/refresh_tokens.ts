import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

import { Provider } from 'oidc-provider';
import type { AdapterPayload, Client, KoaContextWithOIDC, RefreshToken } from 'oidc-provider';

import { BackendUnavailableError, type Completion, type ModelStore } from '../../adapters/store.ts';

import { LIFETIMES } from '../../config/lifetimes.ts';
import { type Clock, nowSeconds, systemClock } from '../shared/clock.ts';
import { HttpError } from '../shared/http_error.ts';

/**
 * Refresh tokens whose storage per grant stays the same however often they rotate.
 *
 * Each use of a refresh token consumes it and issues the next (`rotateRefreshToken`; a FAPI 2.0
 * client's is not rotated: rotatesRefreshTokens). The engine detects a reuse by finding the
 * consumed token's record, so by itself it keeps every rotated-out token until that token's own
 * expiry: a client refreshing hourly would keep hundreds of records per grant. Here a refresh
 * token's value names its grant and is authenticated by the server (`<grant id>.<random>.<tag>`,
 * the tag an HMAC under a key derived from the key-encryption key);
 * the consumed record is deleted once its successor is stored (RefreshTokenRotations), and a value
 * with a valid tag that names a live grant but has no record is handed to the engine as a consumed token of that grant: the engine then revokes
 * the grant, as it does for any reuse. So a grant keeps one refresh token record, and presenting
 * any earlier one still revokes the grant for as long as the grant lives, while a mangled or
 * made-up value (its tag does not verify) is only an unknown token.
 *
 * A copy of the store cannot make a value (the key is not in it), and the live token is still
 * found by the digest of its whole value (src/engine/records_at_rest.ts).
 */
const SEPARATOR = '.';
const TAG_BYTES = 16;
const PURPOSE = 'refresh token values';

export class RefreshTokenValues {
  /** What the keys are derived for (KeyRing.derivedKeys). */
  static readonly PURPOSE = PURPOSE;

  /**
   * The current key first; the others (previous key-encryption keys) still verify. Held as key
   * objects: an HMAC under a raw buffer costs Node several times more, once per value.
   */
  readonly #keys: readonly KeyObject[];

  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new TypeError('at least one key');
    this.#keys = keys.map((key) => createSecretKey(key));
  }

  /** A refresh token value for the grant, around the engine's random value. */
  make(grantId: string, random: string): string {
    return [grantId, random, this.#tagBytes(this.#keys[0]!, grantId, random).toString('base64url')].join(SEPARATOR);
  }

  /** The grant a value names, when this server made it; undefined for any other value. */
  grantOf(value: string): string | undefined {
    const [grantId, random, tag, extra] = value.split(SEPARATOR);
    if (!grantId || !random || !tag || extra !== undefined) return undefined;
    const presented = Buffer.from(tag, 'base64url');
    // Decoding is lenient (stray characters, unused low bits): only the one spelling this server writes counts.
    if (presented.length !== TAG_BYTES || presented.toString('base64url') !== tag) return undefined;
    return this.#keys.some((key) => timingSafeEqual(presented, this.#tagBytes(key, grantId, random))) ? grantId : undefined;
  }

  #tagBytes(key: KeyObject, grantId: string, random: string): Buffer {
    return createHmac('sha256', key).update(`${grantId}${SEPARATOR}${random}`).digest().subarray(0, TAG_BYTES);
  }
}

/**
 * Makes the engine issue refresh token values that name their grant. The engine has no setting for
 * a refresh token's value, only for its length; this replaces the one method that makes it (checked
 * at each upgrade of the pinned engine: the storage test counts records per grant).
 */
export function refreshTokensNameTheirGrant(provider: Provider, values: RefreshTokenValues): void {
  const prototype = provider.RefreshToken.prototype as unknown as { generateTokenId(this: RefreshToken): string };
  const random = prototype.generateTokenId;
  prototype.generateTokenId = function generateTokenId(this: RefreshToken) {
    const value = random.call(this);
    return this.grantId ? values.make(this.grantId, value) : value;
  };
}

/**
 * What the engine is handed for a refresh token value that names a live grant and has no record: a
 * consumed refresh token of that grant, for that grant's client and user. It is unexpired so that
 * the engine reaches its reuse rule (revoke the grant, answer invalid_grant) rather than "expired".
 * Its scope went with its record: it holds whatever scope the refresh asks for, because the engine
 * checks the scope asked for before it finds the token used, and a reuse must reach that rule
 * however it asks (RFC 9700 section 4.14.2), not be answered invalid_scope and leave the grant live.
 */
export function consumedTokenOf(value: string, grantId: string, grant: AdapterPayload): AdapterPayload | undefined {
  const { clientId, accountId } = grant;
  if (typeof clientId !== 'string' || typeof accountId !== 'string') return undefined;
  const now = nowSeconds();
  const scope = scopeAskedFor();
  return { kind: 'RefreshToken', jti: value, grantId, clientId, accountId, iat: now, iiat: now, exp: now + 60, consumed: now, ...(scope ? { scope } : {}) };
}

/** The scope the refresh token grant under way asks for, if it names one. */
function scopeAskedFor(): string | undefined {
  const scope = refreshRequest()?.oidc.params?.scope;
  return typeof scope === 'string' ? scope : undefined;
}

/**
 * How long after a rotation consumed a refresh token a retry with that token takes the rotation
 * over as abandoned: far longer than a rotation takes (a few store writes, each bounded by its
 * timeout), and short enough that a client retrying after a crash or failover is not kept waiting long.
 */
export const ROTATION_ABANDONED_AFTER_SECONDS = 20;

/**
 * How long a rotation keeps trying to complete, or to learn whether it did, before it answers 503:
 * how long a client is kept waiting while no primary answers. Any answer, however late, is
 * unambiguous (a completion leaves a mark of its own claim: ModelStore.complete), so this bounds
 * the wait, not what the answer means.
 */
const COMPLETION_DEADLINE_MS = 30_000;
const COMPLETION_RETRY_MS = 100;

function rotationUnderWay(retryAfterSeconds: number): HttpError {
  return new HttpError(503, 'temporarily_unavailable', 'another request is using this refresh token; try again shortly', {
    'Retry-After': String(retryAfterSeconds),
  });
}

/** The refresh token grant under way at the token endpoint: the only request that rotates. */
function refreshRequest(): KoaContextWithOIDC | undefined {
  const ctx = Provider.ctx;
  return ctx?.oidc?.route === 'token' && ctx.oidc.params?.grant_type === 'refresh_token' ? ctx : undefined;
}

interface Rotation {
  /** The consumed refresh token's store id, and the claim it was consumed under. */
  storeId: string;
  claim: string;
  /** When the consumption was asked for (Clock ms): it was made no earlier. */
  askedAt: number;
}

/**
 * A rotation whose answer the client never got leaves the refresh token it presented usable, and
 * no refresh token is ever redeemed twice.
 *
 * The engine rotates in separate writes: it consumes the presented token, then stores its
 * successor; once the answer is settled, the token endpoint's last step (finish) deletes the
 * consumed token (the rotation completed). Each consumption is made under its own claim
 * (ModelStore.consume), and only that claim can give it back or complete it.
 * - The successor's write fails (an outage, or replicas that do not confirm it), or anything after
 *   it fails the request: the client is answered an error and still holds the presented token,
 *   which must not then count as a reuse (that revokes the grant). The consumption is given back,
 *   the successor discarded, the failure answered. A consumption that fails is given back by the
 *   store itself.
 * - The completion's answer is lost (the Redis primary dies with it), or its write is refused (a
 *   new primary without the replicas it must wait for): it is tried again until the store answers,
 *   for up to COMPLETION_DEADLINE_MS, and after each refusal its outcome is read, which a primary
 *   serves while it refuses writes. A completion leaves a mark of its claim, so the rotation tells
 *   its own completion, however late it learns of it, from a takeover's: its own means the
 *   successor is answered.
 * - The rotation is cut short before any of that (the process is killed, the primary dies with
 *   the answer to the consumption, nothing could be given back): the consumed token stays behind
 *   with no successor. A retry within ROTATION_ABANDONED_AFTER_SECONDS of the consumption is
 *   answered 503 with Retry-After (the rotation may still be under way); after it, the rotation is
 *   abandoned, and the retry takes the consumption over under a new claim and rotates.
 * - A rotation taken over cannot complete (its claim is no longer the token's, or the token was
 *   completed under the other's): it discards its successor and answers invalid_grant, so one
 *   consumption is only ever answered once.
 * A presented token found with no record (its rotation completed) is a reuse, as the engine rules.
 */
export class RefreshTokenRotations {
  readonly #models: ModelStore;
  readonly #request: () => object | undefined;
  readonly #clock: Clock;
  /** Per request: when it asked to consume a refresh token, and then what it consumed, until its successor is stored. */
  readonly #asked = new WeakMap<object, number>();
  readonly #consumed = new WeakMap<object, Rotation>();
  /** Per request: its rotation once the successor is stored, until the answer is settled (finish). */
  readonly #stored = new WeakMap<object, Rotation & { successor: string }>();

  /** `request`: the refresh token grant under way, if any; by default the engine's own context (Provider.ctx) when it is one. */
  constructor(models: ModelStore, request: () => object | undefined = refreshRequest, clock: Clock = systemClock) {
    this.#models = models;
    this.#request = request;
    this.#clock = clock;
  }

  /**
   * What the refresh token grant is handed for a refresh token record: one consumed by a rotation
   * that may still be under way is refused for now (503, Retry-After); one consumed by an
   * abandoned rotation is handed over as unconsumed (its consumption is then taken over).
   */
  found(payload: AdapterPayload): AdapterPayload {
    if (typeof payload.consumed !== 'number' || !this.#request()) return payload;
    const age = nowSeconds(this.#clock) - payload.consumed;
    if (age >= ROTATION_ABANDONED_AFTER_SECONDS) {
      const { consumed: _abandoned, ...unconsumed } = payload;
      return unconsumed;
    }
    throw rotationUnderWay(ROTATION_ABANDONED_AFTER_SECONDS - age);
  }

  /**
   * What a request that lost the consumption of a refresh token to another one (both found it
   * unconsumed) is refused with: that rotation is under way, as when found consumed a moment later.
   * A retry once it has completed is then a reuse, which revokes the grant, as the engine rules.
   */
  underWay(): HttpError {
    return rotationUnderWay(ROTATION_ABANDONED_AFTER_SECONDS);
  }

  /** Before a consumption: the time at or before which one is abandoned, for a refresh token grant; undefined otherwise. */
  abandonedBefore(): number | undefined {
    const request = this.#request();
    if (!request) return undefined;
    this.#asked.set(request, this.#clock());
    return nowSeconds(this.#clock) - ROTATION_ABANDONED_AFTER_SECONDS;
  }

  /** After the request won the consumption of a refresh token; outside a refresh token grant, it is completed at once. */
  async consumed(storeId: string, claim: string): Promise<void> {
    const request = this.#request();
    if (!request) {
      await this.#models.complete(storeId, claim);
      return;
    }
    this.#consumed.set(request, { storeId, claim, askedAt: this.#asked.get(request) ?? this.#clock() });
  }

  /** Stores a refresh token through `write`: in a rotation, its successor, which waits for finish() to complete the rotation. */
  async store(storeId: string, write: () => Promise<void>): Promise<void> {
    const request = this.#request();
    const rotation = request && this.#consumed.get(request);
    if (!rotation) return write();
    this.#consumed.delete(request);
    try {
      await write();
    } catch (error) {
      await this.#giveBack(rotation, storeId);
      throw error;
    }
    this.#stored.set(request, { ...rotation, successor: storeId });
  }

  /**
   * Once the request's answer is settled: with the tokens about to be sent (`answered`), completes
   * its rotation, and refuses them when it cannot (503 when the store cannot say, invalid_grant
   * when a retry took the rotation over); with anything else, gives the consumed token back and
   * discards the successor, so the client's retry is no reuse. Completing last means that nothing
   * the engine still does after storing the successor (building the access token reads the store)
   * can fail a request whose rotation is complete.
   */
  async finish(request: object, answered: boolean): Promise<void> {
    const consumed = this.#consumed.get(request);
    const stored = this.#stored.get(request);
    this.#consumed.delete(request);
    this.#stored.delete(request);
    if (!answered) {
      if (stored) await this.#giveBack(stored, stored.successor);
      else if (consumed) await this.#models.release(consumed.storeId, consumed.claim).catch(() => undefined);
      return;
    }
    if (!stored) return;
    let completed: boolean;
    try {
      completed = await this.#complete(stored);
    } catch (error) {
      await this.#giveBack(stored, stored.successor);
      throw error;
    }
    if (completed) {
      await this.#models.forgetCompletion(stored.storeId, stored.claim).catch(() => undefined);
      return;
    }
    // Taken over by a retry that found this rotation abandoned: the successor is never answered.
    await this.#models.discard(stored.successor).catch(() => undefined);
    throw new HttpError(400, 'invalid_grant', 'refresh token already used');
  }

  /** The consumption given back and the successor discarded, as far as the store lets: best effort, as what failed may be the store. */
  async #giveBack({ storeId, claim }: Rotation, successor: string): Promise<void> {
    await Promise.allSettled([this.#models.discard(successor), this.#models.release(storeId, claim)]);
  }

  /**
   * Completes the rotation: true once the consumed token is completed under its claim (by this try,
   * or by an earlier one whose answer was lost, was sent again by the store's client when its
   * connection broke, or was applied by a primary that then could not confirm it: its mark says
   * so). False when another claim holds it or completed it (a retry took the abandoned rotation
   * over; its mark, once that retry has answered, is gone), or it is gone (its grant revoked, which
   * took the successor with it). After each failed try the outcome is read, which a primary
   * refusing writes still serves; past the deadline, only read.
   */
  async #complete(rotation: Rotation): Promise<boolean> {
    let refusal: unknown;
    for (;;) {
      let found: Completion | 'pending' | undefined;
      if (!this.#late(rotation, 0)) {
        try {
          found = await this.#models.complete(rotation.storeId, rotation.claim);
        } catch (error) {
          refusal = error;
        }
      }
      found ??= await this.#models.completionOf(rotation.storeId, rotation.claim).catch(() => undefined);
      if (found !== undefined && found !== 'pending') return found === 'completed';
      if (this.#late(rotation, COMPLETION_RETRY_MS)) throw refusal ?? new BackendUnavailableError('the rotation could not complete in time');
      await new Promise((resolve) => setTimeout(resolve, COMPLETION_RETRY_MS));
    }
  }

  #late({ askedAt }: Rotation, withinMs: number): boolean {
    return this.#clock() - askedAt + withinMs >= COMPLETION_DEADLINE_MS;
  }
}

/**
 * The engine's `rotateRefreshToken`: every refresh rotates, except a FAPI 2.0 client's. FAPI 2.0
 * (section 5.3.2.1) allows rotation only if, when the answer with the new refresh token is lost,
 * the retry with the previous one succeeds; here a rotated-out token presented again is a reuse,
 * which revokes the grant.
 * Rotation adds nothing for such a client anyway (the profile's note): it authenticates with
 * private_key_jwt, so its refresh token is useless without its private key. Its refresh token is
 * then used again and again, and answered back each time; revoking the grant still ends it.
 */
export function rotatesRefreshTokens(isFapiClient: (client: Client) => boolean): (ctx: KoaContextWithOIDC) => boolean {
  return (ctx) => !ctx.oidc.client || !isFapiClient(ctx.oidc.client);
}

/**
 * A refresh token's lifetime: each one lapses unused after LIFETIMES.RefreshToken (sliding: each
 * rotation starts it again), and none outlives `absoluteSeconds` after the grant's first refresh
 * token was issued (`iiat`, which rotation carries over), after which the user must sign in again.
 * A FAPI 2.0 client's is never rotated, so its expiry is final when it is issued: it lasts the
 * whole `absoluteSeconds`, or it would end LIFETIMES.RefreshToken after the sign-in however often used.
 */
export function refreshTokenLifetime(absoluteSeconds: number, isFapiClient: (client: Client) => boolean) {
  return (_ctx: KoaContextWithOIDC | undefined, token: RefreshToken, client?: Client): number => {
    const remaining = (token.iiat ?? nowSeconds()) + absoluteSeconds - nowSeconds();
    const neverRotated = client !== undefined && isFapiClient(client);
    return Math.max(1, neverRotated ? remaining : Math.min(LIFETIMES.RefreshToken, remaining));
  };
}
