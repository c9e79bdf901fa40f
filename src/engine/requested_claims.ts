import type { ClaimsParameter, Grant } from 'oidc-provider';

import { PROFILE_CLAIM_NAMES } from '../accounts/profile.ts';

/** The individual claims a client may ask for with the `claims` parameter (OpenID Connect Core 5.5). */
const REQUESTABLE = new Set<string>(PROFILE_CLAIM_NAMES);

/**
 * The claim names a `claims` request parameter asks for, for the ID token and userinfo together,
 * that this server can release; what the user consents to besides the scopes. The engine has
 * already parsed and validated the parameter; unknown claims are ignored, as 5.5 requires.
 */
export function requestedClaimNames(claims: unknown): string[] {
  const parsed = typeof claims === 'string' ? parseOrNothing(claims) : claims;
  if (!isObject(parsed)) return [];
  const names = new Set<string>();
  for (const target of ['id_token', 'userinfo'] as const) {
    const members = parsed[target];
    if (!isObject(members)) continue;
    for (const name of Object.keys(members)) if (REQUESTABLE.has(name)) names.add(name);
  }
  return [...names];
}

/**
 * The userinfo claims a token's authorization asked for by name and the user granted. The engine
 * keeps them with its own opaque tokens; the product's access tokens are self-contained JWTs read
 * by the host's userinfo endpoint, so the names travel in the token (`userinfo_claims`).
 */
export function grantedUserinfoClaims(claims: ClaimsParameter | undefined, grant: Grant | undefined): string[] {
  const requested = Object.keys(claims?.userinfo ?? {}).filter((name) => REQUESTABLE.has(name));
  if (!grant || requested.length === 0) return [];
  return grant.getOIDCClaimsFiltered(new Set(requested));
}

function parseOrNothing(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
