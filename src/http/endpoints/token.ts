import type { Middleware } from 'koa';
import { errors, type Provider } from 'oidc-provider';

import type { ProtectedResources } from '../../clients/protected_resources.ts';
import type { RefreshTokenRotations } from '../../engine/refresh_tokens.ts';
import { refuseAtRedemption } from '../../engine/refusals_at_redemption.ts';
import { apiAudience, grantedDefault, proofRequired, unknownResource } from '../../engine/resource_indicators.ts';
import type { RateLimiting } from '../../rate_limits/limits.ts';
import { tokenRequestForm, type TokenRequestForm } from '../token_request_form.ts';
import { fapiClientsUseKeys } from './fapi_clients.ts';
import { rfc6749ErrorCodes } from './rfc6749_errors.ts';

export interface TokenEndpointDependencies {
  provider: Provider;
  /** Refresh token rotations, completed here once the answer is settled. */
  rotations: RefreshTokenRotations;
  rateLimits: RateLimiting;
  /** The APIs tokens are issued for. */
  resources: ProtectedResources;
}

/**
 * POST /oauth/token: what runs around the engine's token endpoint, in order.
 *
 * Before the engine:
 * 1. the rate limits: requests per client address, tokens issued per client (src/rate_limits/);
 * 2. a FAPI 2.0 client that does not authenticate with private_key_jwt (one stored before FAPI=on)
 *    is refused (fapi_clients.ts);
 * 3. a `resource` the server issues no tokens for, or one the code's or refresh token's grant does
 *    not include, and a request without a DPoP proof for an API that takes DPoP-bound tokens only,
 *    are found, to be refused before the code or refresh token is used up, once the engine has
 *    checked everything else it takes (src/engine/refusals_at_redemption.ts).
 * After the engine:
 * 4. a refresh token rotation is completed, now that the answer is settled, or given back when the
 *    answer is an error (src/engine/refresh_tokens.ts, RefreshTokenRotations.finish);
 * 5. RFC 6749 error codes where the engine's differ (rfc6749_errors.ts).
 */
export function tokenEndpoint({ provider, rotations, rateLimits, resources }: TokenEndpointDependencies): Middleware[] {
  return [rateLimits.token, fapiClientsUseKeys(provider), refuseTargetBeforeRedemption(provider, resources), rfc6749ErrorCodes, completeRotation(rotations)];
}

/** The last step after the engine: the rotation completed only for tokens about to be sent. */
function completeRotation(rotations: RefreshTokenRotations): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      await rotations.finish(ctx, false);
      throw error;
    }
    await rotations.finish(ctx, ctx.status === 200);
  };
}

/**
 * A code or refresh token request's target is checked before the engine runs. The engine checks it
 * only after it has consumed the authorization code or rotated the refresh token, so a request it
 * then refused had used them up, and the client's retry with what it still holds was taken for a
 * replay, which revokes the whole grant. So these are refused, with nothing used up, where the
 * engine would use the code or refresh token up, once it has checked everything else they take
 * (the client's authentication, the PKCE verifier, the DPoP key it is bound to:
 * src/engine/refusals_at_redemption.ts):
 * - a `resource` (RFC 8707) that is no API of this server, or more than one; a request without a
 *   DPoP proof naming an API that takes DPoP-bound tokens only (RFC 9449);
 * - what depends on the code or refresh token: a `resource` their grant was not given for
 *   (section 2.2), and a request without a proof for the API their token would be for when none is
 *   named.
 * Held until then, they tell a client that fails to authenticate only that (`invalid_client`), and
 * whoever holds a code or refresh token, without what else it takes to use it, nothing of it.
 * client_credentials consumes nothing: its handler checks the target itself, once the client is
 * authenticated (src/engine/grants/client_credentials.ts).
 * A `resource` sent without a value counts as none (RFC 6749 section 3.2). A code or refresh token
 * used already is refused by none of these: it goes to the engine, whose rule for a replay revokes
 * the grant, however the request is phrased (RFC 9700 section 4.14.2).
 */
function refuseTargetBeforeRedemption(provider: Provider, resources: ProtectedResources): Middleware {
  const defaultResource = apiAudience(provider.issuer);
  return async (ctx, next) => {
    const form = await tokenRequestForm(ctx);
    if (!form || !REDEEMING_GRANTS.has(form.get('grant_type') ?? '')) return next();
    const requested = form.getAll('resource');
    const proofToCheck = !ctx.get('DPoP') && await resources.someRequireDpop();
    if (requested.length === 0 && !proofToCheck) return next();
    const redeemed = await redeemedToken(provider, form);
    // A code or refresh token used already is a replay whatever else the request says: the
    // engine's rule answers it and revokes the grant, which a refusal here would spare.
    if (redeemed === 'used') return next();
    const named = requested[0] || undefined;
    const refusal = await refusalOfTarget(requested, named, proofToCheck, resources)
      ?? (redeemed && await refusalOfGrant(redeemed.resources, named, proofToCheck, resources, defaultResource));
    if (refusal) refuseAtRedemption(ctx, refusal);
    await next();
  };
}

/** The grants that use up what they redeem: an authorization code, a refresh token. */
const REDEEMING_GRANTS = new Set(['authorization_code', 'refresh_token']);

/** What is wrong with the `resource` named whatever the grant: more than one, none of this server's, or a DPoP-only API asked for without a proof. */
async function refusalOfTarget(
  requested: readonly string[], named: string | undefined, proofToCheck: boolean, resources: ProtectedResources,
): Promise<errors.OIDCProviderError | undefined> {
  if (requested.length > 1) return new errors.InvalidTarget('one resource at most in a token request (RFC 8707 section 2)');
  if (named === undefined) return undefined;
  const api = await resources.find(named);
  if (!api) return new errors.InvalidTarget(unknownResource(named));
  return proofToCheck && api.dpopRequired ? new errors.InvalidDpopProof(proofRequired(api)) : undefined;
}

/** What depends on the grant a code or refresh token redeems: a `resource` it lacks, or no proof for the API its token would be for. */
async function refusalOfGrant(
  granted: readonly string[], named: string | undefined, proofToCheck: boolean, resources: ProtectedResources, defaultResource: string,
): Promise<errors.OIDCProviderError | undefined> {
  if (named !== undefined) {
    if (granted.includes(named)) return undefined;
    return new errors.InvalidTarget(`the grant does not include ${named.slice(0, 200)}; a token is issued only for the APIs the user allowed (RFC 8707 section 2.2)`);
  }
  if (!proofToCheck) return undefined;
  const target = grantedDefault(granted, defaultResource);
  const api = target === undefined ? undefined : await resources.find(target);
  return api?.dpopRequired ? new errors.InvalidDpopProof(proofRequired(api)) : undefined;
}

/**
 * The code or refresh token the request redeems, as stored: `used` when it was used already (a
 * replay), else its resources; undefined when it names none the store knows.
 */
async function redeemedToken(provider: Provider, form: TokenRequestForm): Promise<'used' | { resources: string[] } | undefined> {
  const grantType = form.get('grant_type');
  const value = grantType === 'refresh_token' ? form.get('refresh_token') : grantType === 'authorization_code' ? form.get('code') : null;
  if (!value) return undefined;
  const model = grantType === 'refresh_token'
    ? await provider.RefreshToken.find(value, { ignoreExpiration: true })
    : await provider.AuthorizationCode.find(value, { ignoreExpiration: true });
  if (!model) return undefined;
  // The engine's types name `consumed` on refresh tokens only; codes carry it too.
  if ((model as { consumed?: unknown }).consumed) return 'used';
  const { resource } = model as { resource?: string | string[] };
  return { resources: resource === undefined ? [] : typeof resource === 'string' ? [resource] : resource };
}
