import type { ModuleContext } from '../context.ts';
import type { IdToken } from '../client/id_token.ts';
import { SCOPE_STANDARD_CLAIMS } from './standard_claims.ts';

/** Claims any ID token may carry without being asked (EnsureIdTokenDoesNotContainNonRequestedClaims). */
const ID_TOKEN_VALID_CLAIMS = ['iss', 'sub', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'acr', 'amr', 'azp', 'at_hash', 'c_hash', 'nbf', 'jti', 'sid', 's_hash', 'openbanking_intent_id', 'txn'];

/** EnsureIdTokenDoesNotContainNonRequestedClaims (a warning): only token claims and the scopes' claims. */
export function warnNonRequestedClaims(ctx: ModuleContext, idToken: IdToken, scope: string): void {
  const scopes = scope.split(' ');
  const allowed = new Set([...ID_TOKEN_VALID_CLAIMS, ...(scopes.includes('openid') ? scopes.flatMap((value) => SCOPE_STANDARD_CLAIMS[value] ?? []) : [])]);
  const extra = Object.keys(idToken.claims).filter((claim) => !allowed.has(claim));
  ctx.warn(extra.length === 0, `id_token contains non-requested claims: ${extra.join(', ')}`);
}

/** EnsureIdTokenDoesNotContainName (a warning): name was not asked for in the id_token. */
export function warnNameInIdToken(ctx: ModuleContext, idToken: IdToken): void {
  ctx.warn(idToken.claims.name === undefined, 'Unexpectedly found name in id_token: it was not requested there (OIDCC-5.5)');
}

/** EnsureIdTokenContainsKid (OIDCC-10.1). */
export function checkKid(ctx: ModuleContext, idToken: IdToken): void {
  ctx.check(typeof idToken.header.kid === 'string' && idToken.header.kid !== '', 'kid was not found in the ID token header (OIDCC-10.1)');
}

/** CheckIdTokenSignatureAlgorithm / EnsureIdTokenSignatureIsRS256. */
export function checkAlg(ctx: ModuleContext, idToken: IdToken, expected: string): void {
  ctx.check(idToken.header.alg === expected, `the id_token is signed with ${idToken.header.alg}, expected ${expected} (OIDCC-3.1.3.7)`);
}
