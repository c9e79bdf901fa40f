import type { Middleware } from 'koa';

import type { RateLimiting } from '../../rate_limits/limits.ts';
import { mayIntrospect } from '../../tokens/introspection_policy.ts';
import type { LiveRoles } from '../../resource/live_roles.ts';
import { isUserToken, type AccessTokenVerifier } from '../../tokens/verifier.ts';
import { engineRefusedJwt } from './engine_refused_jwt.ts';
import { rfc6749ErrorCodes } from './rfc6749_errors.ts';

/**
 * POST /oauth/introspect (RFC 7662): what runs around the engine's introspection endpoint, in order.
 * The engine authenticates the client and introspects refresh tokens; after it:
 * 1. a failed client authentication (401 invalid_client) counts against the client address, and
 *    past the limit is answered 429 (src/rate_limits/limits.ts); a client that authenticates is
 *    never refused by that count;
 * 2. RFC 6749 error codes where the engine's differ (rfc6749_errors.ts);
 * 3. a JWT access token, which the engine refuses to introspect, is answered from its verified
 *    claims and the revocation list, for the callers allowed to see it (src/tokens/introspection_policy.ts),
 *    a user's with the role it acts with now (src/resource/live_roles.ts).
 */
export function introspectionEndpoint(verifier: AccessTokenVerifier, liveRoles: LiveRoles, rateLimits: RateLimiting): Middleware[] {
  return [rateLimits.introspection, rfc6749ErrorCodes, introspectJwt(verifier, liveRoles)];
}

function introspectJwt(verifier: AccessTokenVerifier, liveRoles: LiveRoles): Middleware {
  return async (ctx, next) => {
    await next();
    const engine = engineRefusedJwt(ctx);
    if (!engine) return;
    const { token, client } = engine;
    const claims = await verifier.verify(token);
    // The engine's rule for the tokens it introspects; a token the caller may not see is answered
    // exactly as an unknown one.
    const allowed = claims && mayIntrospect(client, { clientId: claims.client_id, audience: claims.aud });
    // A user's token says the role it acts with now, as the data API reads it: a demotion shows at
    // once, and a user no longer in the workspace has no active token there.
    const role = allowed && isUserToken(claims) ? await liveRoles.ofToken(claims) : undefined;
    ctx.status = 200;
    if (!allowed || (isUserToken(claims) && !role)) {
      ctx.body = { active: false };
      return;
    }
    // A DPoP-bound token is said to be one, with its key's thumbprint (`cnf.jkt`, RFC 9449 section 6.2), so a resource server can check its proof.
    ctx.body = { active: true, token_type: claims.cnf?.jkt ? 'DPoP' : 'Bearer', ...claims, ...(role ? { role } : {}) };
  };
}
