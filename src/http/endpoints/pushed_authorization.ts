import type { Middleware } from 'koa';
import type { Provider } from 'oidc-provider';

import type { RateLimiting } from '../../rate_limits/limits.ts';
import { fapiClientsUseKeys } from './fapi_clients.ts';
import { rfc6749ErrorCodes } from './rfc6749_errors.ts';

/**
 * POST /oauth/par (RFC 9126): what runs around the engine's pushed authorization request endpoint.
 *
 * Before the engine:
 * 1. the rate limits, as at the token endpoint: requests per client address, requests pushed per
 *    client (counted apart from its tokens; src/rate_limits/);
 * 2. a FAPI 2.0 client that does not authenticate with private_key_jwt (one stored before
 *    FAPI=on) is refused, as at the token endpoint (fapi_clients.ts).
 * The engine then authenticates the client, checks the request as the authorization endpoint
 * would, and answers a `request_uri` that lives 60 seconds and is used once.
 * After the engine:
 * 3. RFC 6749 error codes where the engine's differ, as at the token endpoint (RFC 9126 section 2.3
 *    answers as RFC 6749 section 5.2 does; rfc6749_errors.ts): no client authentication is 401
 *    `invalid_client`, and every 401 has its challenge. A refusal the engine gives no
 *    description says what to do instead, as everywhere (src/http/errors.ts).
 */
export function pushedAuthorizationEndpoint(rateLimits: RateLimiting, provider: Provider): Middleware[] {
  return [rateLimits.pushedAuthorization, fapiClientsUseKeys(provider), rfc6749ErrorCodes];
}
