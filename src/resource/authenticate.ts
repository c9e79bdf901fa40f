import type { Context, Middleware } from 'koa';

import { ROLES, type Role } from '../../adapters/store.ts';
import { isUserToken, type AccessTokenClaims, type AccessTokenVerifier } from '../tokens/verifier.ts';
import { looksLikeApiKey } from '../api_keys/format.ts';
import type { ApiKeys } from '../api_keys/api_keys.ts';
import type { FailedCredentials } from '../rate_limits/limits.ts';
import { bearerRefusal, bearerToken } from './bearer.ts';
import type { LiveRoles } from './live_roles.ts';
import { lowerRole, type Principal } from './principal.ts';

/** The scope an OAuth token needs for the data API. */
export const DATA_API_SCOPE = 'api';

export interface Authenticators {
  /** The API's resource identifier: a token for another API is refused. */
  audience: string;
  verifier: AccessTokenVerifier;
  apiKeys: ApiKeys;
  liveRoles: LiveRoles;
  /** The protected resource metadata URL, named in every challenge (RFC 9728 section 5.1). */
  resourceMetadata: string;
  /** Counts each credential that does not verify against the client address (answers 429 past the limit). */
  failedCredentials?: FailedCredentials;
}

/**
 * Every data API request carries `Authorization: Bearer` with an OAuth access token or an API
 * key; the prefix says which, and a credential is checked only as what it claims to be. Sets
 * `ctx.state.principal`, or refuses as RFC 6750 says.
 */
export function authenticate({ audience, verifier, apiKeys, liveRoles, resourceMetadata, failedCredentials }: Authenticators): Middleware {
  const refusal = (status: 401 | 403, error?: 'invalid_token' | 'insufficient_scope', description?: string, scope?: string) =>
    bearerRefusal({ status, resourceMetadata, ...(error ? { error } : {}), ...(description ? { description } : {}), ...(scope ? { scope } : {}) });
  // Only a credential that does not verify counts: a request without one is how a client finds
  // the challenge (RFC 9728), and a token that verifies but may not do this was not guessed.
  const failed = async (ctx: Context, description: string) => {
    const answer = refusal(401, 'invalid_token', description);
    return failedCredentials ? failedCredentials.refused(ctx, answer) : answer;
  };

  return async (ctx, next) => {
    const credential = bearerToken(ctx);
    if (!credential) throw refusal(401, undefined, 'an OAuth access token or an API key is required (Authorization: Bearer)');

    if (looksLikeApiKey(credential)) {
      const key = await apiKeys.verify(credential);
      if (!key) throw await failed(ctx, 'the API key is invalid, expired or revoked');
      ctx.state.principal = { kind: 'api_key', workspaceId: key.workspaceId, keyId: key.id };
      return next();
    }

    const claims = await verifier.verify(credential, audience);
    if (!claims) throw await failed(ctx, 'the access token is invalid, expired or revoked');
    if (!(claims.scope ?? '').split(' ').includes(DATA_API_SCOPE)) {
      throw refusal(403, 'insufficient_scope', `the access token needs the ${DATA_API_SCOPE} scope`, DATA_API_SCOPE);
    }
    const principal = await tokenPrincipal(claims, liveRoles);
    if (!principal) throw refusal(401, 'invalid_token', 'the user is no longer a member of the workspace this token is for');
    ctx.state.principal = principal;
    return next();
  };
}

async function tokenPrincipal(claims: AccessTokenClaims, liveRoles: LiveRoles): Promise<Principal | undefined> {
  if (typeof claims.workspace_id !== 'string') return undefined;
  if (!isUserToken(claims)) return { kind: 'client', workspaceId: claims.workspace_id, clientId: claims.client_id };
  const issuedRole = ROLES.includes(claims.role as Role) ? claims.role as Role : undefined;
  const currentRole = await liveRoles.roleOf(claims.sub, claims.workspace_id);
  if (!issuedRole || !currentRole) return undefined;
  // A demotion applies at once; a promotion with the next token.
  return { kind: 'user', workspaceId: claims.workspace_id, userId: claims.sub, clientId: claims.client_id, role: lowerRole(issuedRole, currentRole) };
}
