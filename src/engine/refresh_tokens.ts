import { createHmac, timingSafeEqual } from 'node:crypto';

import { Provider } from 'oidc-provider';
import type { AdapterPayload, KoaContextWithOIDC, RefreshToken } from 'oidc-provider';

import type { ModelStore } from '../../adapters/store.ts';

import { LIFETIMES } from '../../config/lifetimes.ts';
import { nowSeconds } from '../shared/clock.ts';

/**
 * Refresh tokens whose storage per grant stays the same however often they rotate.
 *
 * Each use of a refresh token consumes it and issues the next (`rotateRefreshToken`). The engine
 * detects a reuse by finding the consumed token's record, so by itself it keeps every rotated-out
 * token until that token's own expiry: a client refreshing hourly would keep hundreds of records
 * per grant. Here a refresh token's value names its grant and is authenticated by the server
 * (`<grant id>.<random>.<tag>`, the tag an HMAC under a key derived from the key-encryption key);
 * the consumed record is deleted once its successor is stored (RefreshTokenRotations), and a value with a valid tag that names a live grant but
 * has no record is handed to the engine as a consumed token of that grant: the engine then revokes
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
 * A rotation whose answer the client never got leaves the refresh token it presented usable.
 *
 * The engine rotates in separate writes: it consumes the presented token, then stores its
 * successor. When the successor's write fails (an outage, or replicas that do not confirm it), the
 * client is answered 503 and still holds the presented token, which must not then count as a
 * reuse (that revokes the grant). So the consumed token is deleted only once its successor is
 * stored; if that write fails, the consumption is given back and the successor discarded, and the
 * failure is answered. A consumption that fails is given back by the store itself (ModelStore.consume).
 * Only the request that won the consumption gives it back, and only when it answers no token,
 * so no refresh token is ever redeemed twice.
 */
export class RefreshTokenRotations {
  readonly #models: ModelStore;
  readonly #request: () => object | undefined;
  /** Per request: the store id of the refresh token it consumed, until its successor is stored. */
  readonly #consumed = new WeakMap<object, string>();

  /** `request`: the request under way; the engine's own context (Provider.ctx) by default. */
  constructor(models: ModelStore, request: () => object | undefined = () => Provider.ctx) {
    this.#models = models;
    this.#request = request;
  }

  /** After the request won the consumption of a refresh token; outside a request, it is deleted at once. */
  async consumed(storeId: string): Promise<void> {
    const request = this.#request();
    if (request) this.#consumed.set(request, storeId);
    else await this.#models.destroy(storeId);
  }

  /** Stores a refresh token through `write`: in a rotation, its successor, and the end of the rotation. */
  async store(storeId: string, write: () => Promise<void>): Promise<void> {
    const request = this.#request();
    const consumed = request && this.#consumed.get(request);
    if (!consumed) return write();
    this.#consumed.delete(request);
    try {
      await write();
    } catch (error) {
      await Promise.allSettled([this.#models.discard(storeId), this.#models.release(consumed)]);
      throw error;
    }
    // Not failing the answer: the successor is stored, and a consumed record left behind is still a reuse to the engine.
    await this.#models.destroy(consumed).catch(() => undefined);
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
