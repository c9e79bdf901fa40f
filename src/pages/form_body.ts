import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';

import { HttpError, unreadableBodyStatus } from '../shared/http_error.ts';

/** Bytes at most in a page's form (sign-in, consent, settings). */
const FORM_LIMIT = '16kb';

/**
 * Reads a page's form body into `ctx.request.body`. One it cannot read is refused in words for the
 * person who sent it (the host shows the error page, not the API's JSON).
 */
export function formBody(): Middleware {
  const parse = bodyParser({ enableTypes: ['form'], formLimit: FORM_LIMIT });
  return async (ctx, next) => {
    try {
      await parse(ctx, async () => undefined);
    } catch (error) {
      const status = unreadableBodyStatus(error);
      if (status === undefined) throw error;
      throw new HttpError(status, 'invalid_request', status === 413 ? 'The form was larger than this server accepts, so nothing was changed' : 'The form could not be read, so nothing was changed');
    }
    await next();
  };
}
