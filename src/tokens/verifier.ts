import { createLocalJWKSet, jwtVerify, type JWK, type JWTPayload } from 'jose';

import { boundedCache, type BoundedCache } from '../shared/bounded_cache.ts';
import { systemClock, type Clock } from '../shared/clock.ts';
import { digest } from '../shared/digest.ts';
import type { RevocationList } from './revocation_list.ts';

/** The claims of an access token this server issued (RFC 9068 plus the workspace claims). */
export interface AccessTokenClaims extends JWTPayload {
  jti: string;
  iat: number;
  exp: number;
  sub: string;
  client_id: string;
  /** The grant reference (`gid`, see revocation_list.ts); user tokens only. */
  gid?: string;
  scope?: string;
  workspace_id: string;
  /** The user's role in the workspace; user tokens only. */
  role?: string;
  /** The key the token is bound to (RFC 9449 section 6.1): its thumbprint, for a token issued with a DPoP proof. */
  cnf?: { jkt?: string };
  /** Userinfo claims asked for by name with the `claims` parameter and granted (src/engine/requested_claims.ts). */
  userinfo_claims?: string[];
}

/** A user's token (authorization code or refresh); client-credentials tokens act for the workspace, with no user. */
export function isUserToken(claims: AccessTokenClaims): boolean {
  return typeof claims.gid === 'string';
}

/** Verified tokens kept, so a token used again (a resource server's calls within its hour) skips the signature check. */
const VERIFIED_TOKENS_KEPT = 10_000;

/**
 * Checks access tokens this server issued: signature (ES256, our keys), `typ` at+jwt, issuer,
 * expiry, and that no revocation matches it (its grant revoked, its client deleted, its API
 * removed, the token itself revoked); the audience is the caller's to check (isFor). No store
 * read: the revocation list is mirrored in process.
 */
export class AccessTokenVerifier {
  readonly #keys: ReturnType<typeof createLocalJWKSet>;
  readonly #issuer: string;
  readonly #revocations: RevocationList;
  readonly #clock: Clock;
  /**
   * The token's digest -> its claims, for tokens whose signature and claims checked out, each kept
   * until it expires. Keyed by digest, so the process's memory holds no usable token for it.
   */
  readonly #verified: BoundedCache<string, AccessTokenClaims>;

  constructor(privateJwks: { keys: JWK[] }, issuer: string, revocations: RevocationList, clock: Clock = systemClock) {
    this.#keys = createLocalJWKSet({ keys: privateJwks.keys.map(publicPart) });
    this.#issuer = issuer;
    this.#revocations = revocations;
    this.#clock = clock;
    this.#verified = boundedCache({ max: VERIFIED_TOKENS_KEPT, clock });
  }

  /**
   * The token's claims, or undefined for anything not valid right now, for whichever API it was
   * issued: the API asking checks that it is one of its own (isFor; src/resource/bearer.ts
   * takenToken), so that a good token sent to the wrong API can be told so.
   */
  async verify(token: string): Promise<AccessTokenClaims | undefined> {
    const claims = await this.#decode(token);
    if (!claims || await this.#revocations.isRevoked(claims)) return undefined;
    return claims;
  }

  /** Signature and claims only, ignoring revocation. */
  async #decode(token: string): Promise<AccessTokenClaims | undefined> {
    // A signature stays valid; only time can make a known token invalid, and the cache forgets it then.
    const key = digest(token);
    const known = this.#verified.get(key);
    if (known) return known;
    const claims = await this.#verify(token);
    const lifeMs = claims ? claims.exp * 1000 - this.#clock() : 0;
    if (claims && lifeMs > 0) this.#verified.set(key, claims, { ttl: lifeMs });
    return claims;
  }

  async #verify(token: string): Promise<AccessTokenClaims | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.#keys, {
        currentDate: new Date(this.#clock()),
        issuer: this.#issuer,
        typ: 'at+jwt',
        algorithms: ['ES256'],
        requiredClaims: ['jti', 'sub', 'client_id', 'exp', 'iat', 'aud'],
      });
      // Shared by every later use of the same token.
      return Object.freeze(payload) as AccessTokenClaims;
    } catch {
      return undefined;
    }
  }

  /** RFC 7009 revocation of one token. */
  async revoke(claims: AccessTokenClaims): Promise<void> {
    await this.#revocations.revokeToken(claims);
  }
}

/** Whether the token's `aud` names `audience`. */
export function isFor(claims: AccessTokenClaims, audience: string): boolean {
  return Array.isArray(claims.aud) ? claims.aud.includes(audience) : claims.aud === audience;
}

function publicPart(jwk: JWK): JWK {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, oth: _oth, ...publicJwk } = jwk;
  return publicJwk;
}
