import type { Middleware } from 'koa';

import type { RateLimiting } from '../../rate_limits/limits.ts';
import { HttpError } from '../../shared/http_error.ts';
import { tokenRequestForm } from '../token_request_form.ts';
import { rfc6749ErrorCodes } from './rfc6749_errors.ts';

export interface TokenEndpointDependencies {
  rateLimits: RateLimiting;
  /** The one resource tokens are issued for: the data API. */
  audience: string;
}

/**
 * POST /oauth/token: what runs around the engine's token endpoint, in order.
 *
 * Before the engine:
 * 1. the rate limits: requests per client address, tokens issued per client (src/rate_limits/);
 * 2. a `resource` the server issues no tokens for is refused before a code or refresh token is used up.
 * After the engine:
 * 3. RFC 6749 error codes where the engine's differ (rfc6749_errors.ts).
 */
export function tokenEndpoint({ rateLimits, audience }: TokenEndpointDependencies): Middleware[] {
  return [rateLimits.token, refuseUnknownResource(audience), rfc6749ErrorCodes];
}

/**
 * A token request's `resource` (RFC 8707) is checked before the engine runs. The engine checks it
 * only after it has consumed the authorization code or rotated the refresh token, so a request it
 * then refused with invalid_target had used them up, and the client's retry with what it still
 * holds was taken for a replay, which revokes the whole grant. Every token is for the data API
 * (src/engine/resource_indicators.ts), so anything else, or more than one value, is refused here, untouched.
 */
function refuseUnknownResource(audience: string): Middleware {
  return async (ctx, next) => {
    const resources = (await tokenRequestForm(ctx))?.getAll('resource') ?? [];
    if (resources.length === 0 || (resources.length === 1 && resources[0] === audience)) return next();
    const description = resources.length > 1
      ? 'one resource at most: every token of this server is for the data API'
      : `unknown resource; this server issues tokens for ${audience} only`;
    // Browser clients read the token endpoint's answers; the engine's own CORS never runs for this one.
    throw new HttpError(400, 'invalid_target', description, { 'Access-Control-Allow-Origin': '*' });
  };
}
