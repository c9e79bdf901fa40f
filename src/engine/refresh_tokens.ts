import { createHmac, timingSafeEqual } from 'node:crypto';

import { errors, Provider } from 'oidc-provider';
import type { AdapterPayload, KoaContextWithOIDC, RefreshToken } from 'oidc-provider';

import { BackendUnavailableError, type ModelStore } from '../../adapters/store.ts';

import { LIFETIMES } from '../../config/lifetimes.ts';
import { type Clock, nowSeconds, systemClock } from '../shared/clock.ts';
import { HttpError } from '../shared/http_error.ts';

/**
 * Refresh tokens whose storage per grant stays the same however often they rotate.
 *
 * Each use of a refresh token consumes it and issues the next (`rotateRefreshToken`). The engine
 * detects a reuse by finding the consumed token's record, so by itself it keeps every rotated-out
 * token until that token's own expiry: a client refreshing hourly would keep hundreds of records
 * per grant. Here a refresh token's value names its grant and is authenticated by the server
 * (`<grant id>.<random>.<tag>`, the tag an HMAC under a key derived from the key-encryption key);
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

  /** The current key first; the others (previous key-encryption keys) still verify. */
  readonly #keys: readonly Buffer[];

  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new TypeError('at least one key');
    this.#keys = keys;
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

  #tagBytes(key: Buffer, grantId: string, random: string): Buffer {
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
 */
export function consumedTokenOf(value: string, grantId: string, grant: AdapterPayload): AdapterPayload | undefined {
  const { clientId, accountId } = grant;
  if (typeof clientId !== 'string' || typeof accountId !== 'string') return undefined;
  const now = nowSeconds();
  return { kind: 'RefreshToken', jti: value, grantId, clientId, accountId, iat: now, iiat: now, exp: now + 60, consumed: now };
}

/**
 * How long after a rotation consumed a refresh token a retry with that token takes the rotation
 * over as abandoned: far longer than a rotation takes (a few store writes, each bounded by its
 * timeout), and short enough that a client retrying after a crash or failover is not kept waiting long.
 */
export const ROTATION_ABANDONED_AFTER_SECONDS = 20;

/**
 * How long a rotation keeps trying to complete when the store's answer is lost or its writes are
 * refused. Inside ROTATION_ABANDONED_AFTER_SECONDS by 5 s: the difference covers whole-second
 * consumption times and the clocks of two instances differing by up to 4 s, so that no retry can
 * have taken the rotation over meanwhile.
 */
const COMPLETION_DEADLINE_MS = 15_000;
const COMPLETION_RETRY_MS = 100;

/** The refresh token grant under way at the token endpoint: the only request that rotates. */
function refreshRequest(): object | undefined {
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
 * successor; the consumed token is then deleted (the rotation completed). Each consumption is made
 * under its own claim (ModelStore.consume), and only that claim can give it back or complete it.
 * - The successor's write fails (an outage, or replicas that do not confirm it): the client is
 *   answered 503 and still holds the presented token, which must not then count as a reuse (that
 *   revokes the grant). The consumption is given back, the successor discarded, the failure
 *   answered. A consumption that fails is given back by the store itself.
 * - The completion's answer is lost (the Redis primary dies with it), or its write is refused (a
 *   new primary without the replicas it must wait for): it is tried again until the store answers,
 *   for up to COMPLETION_DEADLINE_MS, and after each refusal the token is read, which a primary
 *   serves while it refuses writes. The token found gone means an earlier try completed it, and
 *   the successor is answered.
 * - The rotation is cut short before any of that (the process is killed, the primary dies with
 *   the answer to the consumption, nothing could be given back): the consumed token stays behind
 *   with no successor. A retry within ROTATION_ABANDONED_AFTER_SECONDS of the consumption is
 *   answered 503 with Retry-After (the rotation may still be under way); after it, the rotation is
 *   abandoned, and the retry takes the consumption over under a new claim and rotates.
 * - A rotation taken over cannot complete (its claim is no longer the token's): it discards its
 *   successor and answers invalid_grant, so one consumption is only ever answered once.
 * A presented token found with no record (its rotation completed) is a reuse, as the engine rules.
 */
export class RefreshTokenRotations {
  readonly #models: ModelStore;
  readonly #request: () => object | undefined;
  readonly #clock: Clock;
  /** Per request: when it asked to consume a refresh token, and then what it consumed, until its successor is stored. */
  readonly #asked = new WeakMap<object, number>();
  readonly #consumed = new WeakMap<object, Rotation>();

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
    throw new HttpError(503, 'temporarily_unavailable', 'another request is using this refresh token; try again shortly', {
      'Retry-After': String(ROTATION_ABANDONED_AFTER_SECONDS - age),
    });
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

  /** Stores a refresh token through `write`: in a rotation, its successor, and then completes the rotation. */
  async store(storeId: string, write: () => Promise<void>): Promise<void> {
    const request = this.#request();
    const rotation = request && this.#consumed.get(request);
    if (!rotation) return write();
    this.#consumed.delete(request);
    try {
      await write();
      if (await this.#complete(rotation)) return;
    } catch (error) {
      await Promise.allSettled([this.#models.discard(storeId), this.#models.release(rotation.storeId, rotation.claim)]);
      throw error;
    }
    // Taken over by a retry that found this rotation abandoned (or the grant went meanwhile): the successor is never answered.
    await this.#models.discard(storeId).catch(() => undefined);
    throw new errors.InvalidGrant('refresh token already used');
  }

  /**
   * Completes the rotation: true once the consumed token is deleted under its claim, or found gone:
   * deleted by an earlier try whose answer was lost (or by that try sent again by the store's client
   * when its connection broke, or applied by a primary that then could not confirm it), or by a
   * grant revoked meanwhile, which took the successor with it. No retry can have taken the rotation
   * over and completed it this early (COMPLETION_DEADLINE_MS).
   */
  async #complete(rotation: Rotation): Promise<boolean> {
    for (;;) {
      if (this.#late(rotation, 0)) throw new BackendUnavailableError('the rotation could not complete in time');
      try {
        return await this.#models.complete(rotation.storeId, rotation.claim) !== 'unclaimed';
      } catch (error) {
        // Found gone only as read in time: a read past the deadline may find a takeover's doing.
        if (await this.#foundGone(rotation) && !this.#late(rotation, 0)) return true;
        if (this.#late(rotation, COMPLETION_RETRY_MS)) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, COMPLETION_RETRY_MS));
    }
  }

  /** Whether a read finds the consumed token gone; false when it is there or cannot be read. */
  async #foundGone({ storeId }: Rotation): Promise<boolean> {
    return (await this.#models.find(storeId).catch(() => null)) === undefined;
  }

  #late({ askedAt }: Rotation, withinMs: number): boolean {
    return this.#clock() - askedAt + withinMs >= COMPLETION_DEADLINE_MS;
  }
}

/**
 * A refresh token's lifetime: each one lapses unused after LIFETIMES.RefreshToken (sliding: each
 * rotation starts it again), and none outlives `absoluteSeconds` after the grant's first refresh
 * token was issued (`iiat`, which rotation carries over), after which the user must sign in again.
 */
export function refreshTokenLifetime(absoluteSeconds: number) {
  return (_ctx: KoaContextWithOIDC | undefined, token: RefreshToken): number => {
    const remaining = (token.iiat ?? nowSeconds()) + absoluteSeconds - nowSeconds();
    return Math.max(1, Math.min(LIFETIMES.RefreshToken, remaining));
  };
}
