import type { Middleware } from 'koa';

import { ONE_AUTHORIZATION_HEADER } from '../../resource/bearer.ts';
import { HttpError } from '../../shared/http_error.ts';
import { isRepeatedHeader } from '../../shared/repeated_headers.ts';

/**
 * Before every engine endpoint that reads the Authorization header (client authentication, a
 * registration's access token), the header as the engine can read it:
 * - a request with two is refused, 400 `invalid_request`: the engine would read the first only,
 *   which a proxy in front need not;
 * - the spaces after its scheme become one: HTTP allows several (`Basic  <credentials>`, RFC 9110
 *   section 11.4), the engine splits the header at each.
 */
export const authorizationHeader: Middleware = async (ctx, next) => {
  const value = ctx.get('authorization');
  if (!value) return next();
  if (isRepeatedHeader(ctx.req, 'authorization')) {
    throw new HttpError(400, 'invalid_request', ONE_AUTHORIZATION_HEADER, { 'Access-Control-Allow-Origin': '*' });
  }
  if (/^\S+ {2,}/.test(value)) ctx.req.headers.authorization = value.replace(/^(\S+) +/, '$1 ');
  await next();
};
