import type { Middleware } from 'koa';

/**
 * RFC 7009 section 2.2 says only "200"; the engine answers a revoked refresh token with an empty
 * text/plain body, and some client libraries parse every 200 as JSON. Every successful revocation
 * (refresh token, opaque or JWT access token, unknown token) answers the same: 200 `{}`.
 */
export const revocationAnswersJson: Middleware = async (ctx, next) => {
  await next();
  if (ctx.status === 200) ctx.body = {};
};
