import { createHash } from 'node:crypto';

import { errors, type KoaContextWithOIDC, type Provider } from 'oidc-provider';

import type { ModelStore } from '../../adapters/store.ts';
import { nowSeconds } from '../shared/clock.ts';

/**
 * Client assertions (`private_key_jwt`, RFC 7523) are used once, on every instance.
 *
 * The engine remembers each assertion's `jti` until it expires (ReplayDetection.unique), but as a
 * read and then a write: two instances handed the same assertion at once could both find it
 * unused. This replaces that one method with the store's atomic insert (ModelStore.insertNew), so
 * exactly one of them accepts it, keyed and kept as the engine keeps it (checked at each upgrade
 * of the pinned engine: the client authentication tests replay an assertion to two instances).
 */
export function assertionsUsedOnce(provider: Provider, markers: ModelStore): void {
  const replays = provider.ReplayDetection as unknown as { unique(iss: string, jti: string, exp: number): Promise<boolean> };
  replays.unique = async (iss, jti, exp) => {
    const id = usedOnceMarkerId(iss, jti);
    return markers.insertNew(id, { iss, jti: id }, Math.max(USED_ONCE_MIN_SECONDS, exp - nowSeconds()));
  };
}

/**
 * The least a used-once marker is kept. The engine accepts a DPoP proof whose `iat` is within five
 * minutes of its clock either way, but asks for its marker to be kept five minutes from its first
 * use: a proof made ahead of this clock (a client's clock running fast) would be accepted again
 * once its marker was gone. Kept two windows, as the APIs keep theirs (src/tokens/dpop_proofs.ts),
 * no proof outlives its marker; a client assertion that expires sooner is kept a little longer.
 */
const USED_ONCE_MIN_SECONDS = 2 * 300;

/**
 * The marker a client assertion or a DPoP proof leaves once used, by its issuer (the client) and
 * `jti`, as the engine keys it: what is looked up to know whether one was used already.
 */
export function usedOnceMarkerId(iss: string, jti: string): string {
  return createHash('sha256').update(`${iss}${jti}`).digest('base64url');
}

/**
 * The longest a client assertion may stay valid from now. RFC 7523 section 3 lets a server refuse
 * an `exp` "unreasonably far in the future"; client libraries make assertions that live a minute
 * or a few. Its used-once marker is kept until then, so without a bound one assertion could make
 * the store keep a record for ever (or, with an `exp` of 1e300, fail to store it at all).
 */
const ASSERTION_LIFETIME_MAX_SECONDS = 60 * 60;

/** How far ahead of this server's clock a client's may be: an `iat` later than that is not a time the assertion was made. */
const CLIENT_CLOCK_AHEAD_MAX_SECONDS = 60;

/** Part of the engine's `assertJwtClientAuthClaimsAndHeader`: an assertion's times are ones a client's clock could give. */
export function assertionTimesAreBounded(claims: { exp?: unknown; iat?: unknown }, now = nowSeconds()): void {
  if (typeof claims.exp === 'number' && claims.exp - now > ASSERTION_LIFETIME_MAX_SECONDS) {
    throw refusedSignedAssertion(`the client assertion must expire (exp) within ${ASSERTION_LIFETIME_MAX_SECONDS / 60} minutes`);
  }
  if (typeof claims.iat === 'number' && claims.iat - now > CLIENT_CLOCK_AHEAD_MAX_SECONDS) {
    throw refusedSignedAssertion('the client assertion was issued in the future (iat): check the client\'s clock');
  }
}

/**
 * A client assertion's audience must be this server's issuer identifier, alone: an assertion made
 * for one of its endpoints, or for several servers, could be replayed where its maker did not mean
 * it (the audience injection the OpenID Foundation disclosed in 2025; FAPI 2.0 and RFC 7523bis).
 * The engine's `assertJwtClientAuthClaimsAndHeader` hook.
 */
export function audienceIsTheIssuer(ctx: KoaContextWithOIDC, claims: { aud?: unknown }): void {
  const audience = Array.isArray(claims.aud) && claims.aud.length === 1 ? claims.aud[0] : claims.aud;
  if (audience !== ctx.oidc.issuer) {
    throw refusedSignedAssertion(`the client assertion's audience (aud) must be the issuer identifier, ${ctx.oidc.issuer}, alone`);
  }
}

/**
 * The refusal of a client assertion by the engine's `assertJwtClientAuthClaimsAndHeader` hook,
 * which runs once the assertion's signature is verified: its reason is said to the client (the
 * engine says only "client authentication failed"), which learns nothing but what it signed. A
 * stock library that makes its assertions for the token endpoint's URL (Spring Security's,
 * Authlib's) is told what to change.
 */
export function refusedSignedAssertion(reason: string): InstanceType<typeof errors.InvalidClientAuth> {
  const refusal = new errors.InvalidClientAuth(reason);
  refusal.error_description = reason;
  return refusal;
}
