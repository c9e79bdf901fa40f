import type { AdapterPayload, KoaContextWithOIDC, Provider, RefreshToken } from 'oidc-provider';

import { LIFETIMES } from '../../config/lifetimes.ts';
import { nowSeconds } from '../shared/clock.ts';

/**
 * Refresh tokens whose storage per grant stays the same however often they rotate.
 *
 * Each use of a refresh token consumes it and issues the next (`rotateRefreshToken`). The engine
 * detects a reuse by finding the consumed token's record, so by itself it keeps every rotated-out
 * token until that token's own expiry: a client refreshing hourly would keep hundreds of records
 * per grant. Here a refresh token's value starts with its grant's id (`<grant id>.<random>`), the
 * consumed record is deleted at once, and a value that names a live grant but has no record is
 * handed to the engine as a consumed token of that grant: the engine then revokes the grant, as it
 * does for any reuse. So a grant keeps one refresh token record, and presenting any earlier one
 * still revokes the grant for as long as the grant lives.
 *
 * Only someone who held a refresh token of the grant knows its id (it is in no other token, page
 * or response), and presenting a value for it still needs the client's own authentication.
 */
const SEPARATOR = '.';

/**
 * Makes the engine start every refresh token's value with its grant's id. The engine has no
 * setting for a refresh token's value, only for its length; this replaces the one method that makes
 * it (checked at each upgrade of the pinned engine: the storage test counts records per grant).
 */
export function refreshTokensNameTheirGrant(provider: Provider): void {
  const prototype = provider.RefreshToken.prototype as unknown as { generateTokenId(this: RefreshToken): string };
  const random = prototype.generateTokenId;
  prototype.generateTokenId = function generateTokenId(this: RefreshToken) {
    const value = random.call(this);
    return this.grantId ? `${this.grantId}${SEPARATOR}${value}` : value;
  };
}

/** The grant a refresh token value names, when it is of the form refreshTokensNameTheirGrant makes. */
export function grantIdOf(value: string): string | undefined {
  const at = value.indexOf(SEPARATOR);
  return at > 0 && at < value.length - 1 ? value.slice(0, at) : undefined;
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
