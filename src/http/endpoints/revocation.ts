import type { Middleware } from 'koa';

import { HttpError } from '../../shared/http_error.ts';
import { noStore } from '../../shared/no_store.ts';
import { NOT_THE_CALLERS_TOKEN, revocationOutcome } from '../../tokens/revocation_policy.ts';
import type { AccessTokenVerifier } from '../../tokens/verifier.ts';
import { engineRefusedJwt } from './engine_refused_jwt.ts';
import { rfc6749ErrorCodes } from './rfc6749_errors.ts';

/**
 * POST /oauth/revoke (RFC 7009): what runs around the engine's revocation endpoint, in order.
 * The engine authenticates the client and revokes refresh tokens (and their grant); after it:
 * 1. every answer is `Cache-Control: no-store`, as the token and introspection endpoints' are
 *    (the engine sets it there, not here);
 * 2. RFC 6749 error codes where the engine's differ (rfc6749_errors.ts);
 * 3. every successful revocation answers 200 `{}`;
 * 4. a JWT access token, which the engine refuses to revoke, is revoked through the revocation
 *    list (src/tokens/revocation_list.ts), by the rule the engine follows for refresh tokens
 *    (src/tokens/revocation_policy.ts).
 */
export function revocationEndpoint(verifier: AccessTokenVerifier): Middleware[] {
  return [answerNoStore, rfc6749ErrorCodes, answerJson, revokeJwt(verifier)];
}

const answerNoStore: Middleware = async (ctx, next) => {
  try {
    await next();
  } finally {
    noStore(ctx);
  }
};

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
    // RFC 7009 section 2.2: an invalid token (expired, revoked, not ours) is answered 200 without effect.
    const claims = await verifier.verify(engine.token);
    const outcome = claims ? revocationOutcome(engine.client, claims.client_id) : 'ignore';
    if (outcome === 'refuse') throw new HttpError(400, 'invalid_request', NOT_THE_CALLERS_TOKEN);
    if (claims && outcome === 'revoke') await verifier.revoke(claims);
    ctx.status = 200;
    ctx.body = {};
  };
}
