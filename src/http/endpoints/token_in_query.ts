import type { Middleware } from 'koa';

import { refusalOf } from '../../resource/bearer.ts';

const TOKEN_IN_QUERY = 'send the access token in the Authorization header (Bearer): one in the URL is refused, as URLs are logged, kept in browser histories and sent on in Referer (RFC 6750 section 2.3)';

/**
 * Before registration (an initial access token) and RFC 7592 client management (a registration
 * access token): a token sent as `?access_token=` is refused, 400 `invalid_request` with its
 * Bearer challenge (RFC 6750 section 3). The engine refuses one at client management without a
 * challenge, and at registration ignores it: a workspace's client sent with its token there would
 * be registered as a client nobody vetted, bound to no workspace.
 */
export const refuseTokenInQuery: Middleware = async (ctx, next) => {
  if (ctx.query.access_token !== undefined) throw refusalOf({ status: 400, error: 'invalid_request', description: TOKEN_IN_QUERY });
  await next();
};
