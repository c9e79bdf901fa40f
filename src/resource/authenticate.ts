import type { Context, Middleware } from 'koa';

import { isUserToken, type AccessTokenClaims, type AccessTokenVerifier } from '../tokens/verifier.ts';
import { looksLikeApiKey } from '../api_keys/format.ts';
import type { ApiKeys } from '../api_keys/api_keys.ts';
import type { FailedCredentials } from '../rate_limits/limits.ts';
import { accessCredential, missingCredential, refusalOf, takenToken, type Refusal } from './bearer.ts';
import type { LiveRoles } from './live_roles.ts';
import type { Principal } from './principal.ts';
import { dpopChallenge, senderConstraintRefusal, type DpopPolicy } from './sender_constraint.ts';

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
  /** DPoP-bound tokens (RFC 9449): their proofs, and whether plain bearer tokens are refused. */
  dpop: DpopPolicy;
}

/**
 * Every data API request carries an OAuth access token or an API key in `Authorization`: an API
 * key or an unbound token as `Bearer`, a DPoP-bound token as `DPoP` with its proof (RFC 9449). The
 * prefix says which, and a credential is checked only as what it claims to be. Sets
 * `ctx.state.principal`, or refuses as RFC 6750 and RFC 9449 say.
 */
export function authenticate({ audience, verifier, apiKeys, liveRoles, resourceMetadata, failedCredentials, dpop }: Authenticators): Middleware {
  const refusal = (refused: Refusal) => refusalOf({ resourceMetadata, dpop: dpopChallenge(dpop), ...refused });
  // Only a credential that does not verify counts: a request without one is how a client finds
  // the challenge (RFC 9728), and a token that verifies but may not do this was not guessed.
  const failed = async (ctx: Context, description: string) => {
    const answer = refusal({ status: 401, error: 'invalid_token', description });
    return failedCredentials ? failedCredentials.refused(ctx, answer) : answer;
  };

  return async (ctx, next) => {
    const credential = accessCredential(ctx);
    if (!credential) {
      throw refusal(missingCredential(ctx, { description: 'an OAuth access token or an API key is required (Authorization: Bearer, or DPoP for a DPoP-bound token)', scope: DATA_API_SCOPE }));
    }

    if (looksLikeApiKey(credential.token)) {
      if (credential.scheme !== 'Bearer') throw refusal({ status: 401, error: 'invalid_token', description: 'an API key is sent as Authorization: Bearer; DPoP is for access tokens bound to a key' });
      const key = await apiKeys.verify(credential.token);
      if (!key) throw await failed(ctx, 'the API key is invalid, expired or revoked');
      ctx.state.principal = { kind: 'api_key', workspaceId: key.workspaceId, keyId: key.id };
      return next();
    }

    const taken = takenToken(await verifier.verify(credential.token), audience, 'this API');
    if (!('claims' in taken)) {
      // A good token for another API was not guessed: it is not counted as a failure.
      if (taken.forAnotherApi) throw refusal({ status: 401, error: 'invalid_token', description: taken.description });
      throw await failed(ctx, taken.description);
    }
    const { claims } = taken;
    const unbound = await senderConstraintRefusal(ctx, credential, claims, dpop);
    if (unbound) throw refusal(unbound);
    if (!(claims.scope ?? '').split(' ').includes(DATA_API_SCOPE)) {
      throw refusal({ status: 403, error: 'insufficient_scope', description: `the access token needs the ${DATA_API_SCOPE} scope`, scope: DATA_API_SCOPE });
    }
    const principal = await tokenPrincipal(claims, liveRoles);
    if (!principal) throw refusal({ status: 401, error: 'invalid_token', description: 'the user is no longer a member of the workspace this token is for' });
    ctx.state.principal = principal;
    return next();
  };
}

async function tokenPrincipal(claims: AccessTokenClaims, liveRoles: LiveRoles): Promise<Principal | undefined> {
  if (typeof claims.workspace_id !== 'string') return undefined;
  if (!isUserToken(claims)) return { kind: 'client', workspaceId: claims.workspace_id, clientId: claims.client_id };
  const role = await liveRoles.ofToken(claims);
  return role && { kind: 'user', workspaceId: claims.workspace_id, userId: claims.sub, clientId: claims.client_id, role };
}
