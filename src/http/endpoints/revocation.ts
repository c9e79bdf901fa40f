import type { Middleware } from 'koa';

import type { AccessTokenVerifier } from '../../tokens/verifier.ts';
import { engineRefusedJwt } from './engine_refused_jwt.ts';
import { rfc6749ErrorCodes } from './rfc6749_errors.ts';

/**
 * POST /oauth/revoke (RFC 7009): what runs around the engine's revocation endpoint, in order.
 * The engine authenticates the client and revokes refresh tokens (and their grant); after it:
 * 1. RFC 6749 error codes where the engine's differ (rfc6749_errors.ts);
 * 2. every successful revocation answers 200 `{}`;
 * 3. a JWT access token, which the engine refuses to revoke, is revoked through the revocation
 *    list (src/tokens/revocation_list.ts).
 */
export function revocationEndpoint(verifier: AccessTokenVerifier): Middleware[] {
  return [rfc6749ErrorCodes, answerJson, revokeJwt(verifier)];
}

/**
 * RFC 7009 section 2.2 says only "200"; the engine answers a revoked refresh token with an empty
 * text/plain body, and some client libraries parse every 200 as JSON. Every successful revocation
 * (refresh token, opaque or JWT access token, unknown token) answers the same: 200 `{}`.
 */
const answerJson: Middleware = async (ctx, next) => {
  await next();
  if (ctx.status === 200) ctx.body = {};
};

function revokeJwt(verifier: AccessTokenVerifier): Middleware {
  return async (ctx, next) => {
    await next();
    const engine = engineRefusedJwt(ctx);
    if (!engine) return;
    const claims = await verifier.decode(engine.token);
    // RFC 7009: invalid tokens, and other clients' tokens, are answered 200 without effect.
    if (claims && claims.client_id === engine.client.clientId) await verifier.revoke(claims);
    ctx.status = 200;
    ctx.body = {};
  };
}
