import type { Middleware } from 'koa';

import { ONE_AUTHORIZATION_HEADER } from '../../resource/bearer.ts';
import { HttpError } from '../../shared/http_error.ts';
import { isRepeatedHeader } from '../../shared/repeated_headers.ts';

/**
 * Before every engine endpoint that reads the Authorization header (client authentication, a
 * registration's access token): a request with two is refused, 400 `invalid_request`. The engine
 * would read the first only, which a proxy in front need not.
 */
export const oneAuthorizationHeader: Middleware = async (ctx, next) => {
  if (ctx.get('authorization') && isRepeatedHeader(ctx.req, 'authorization')) {
    throw new HttpError(400, 'invalid_request', ONE_AUTHORIZATION_HEADER, { 'Access-Control-Allow-Origin': '*' });
  }
  await next();
};
