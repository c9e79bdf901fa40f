import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';

import { MAX_PASSWORD_LENGTH } from '../accounts/passwords.ts';
import { HttpError, unreadableBodyStatus } from '../shared/http_error.ts';

/** Bytes at most in a page's form (sign-in, consent, settings). */
const FORM_LIMIT = 16 * 1024;

/**
 * Bytes at most in the settings area's password change: three passwords of up to
 * MAX_PASSWORD_LENGTH characters, each up to 12 bytes once form-encoded (a 4-byte UTF-8 character
 * as %XX four times), and a little more, so that any password the rules allow can be chosen there.
 */
export const PASSWORD_FORM_LIMIT = 3 * MAX_PASSWORD_LENGTH * 12 + 4 * 1024;

/**
 * Reads a page's form body, of at most `limitBytes`, into `ctx.request.body`. One it cannot read is
 * refused in words for the person who sent it (the host shows the error page, not the API's JSON).
 */
export function formBody(limitBytes = FORM_LIMIT): Middleware {
  const parse = bodyParser({ enableTypes: ['form'], formLimit: `${limitBytes}b` });
  return async (ctx, next) => {
    try {
      await parse(ctx, async () => undefined);
    } catch (error) {
      const status = unreadableBodyStatus(error);
      if (status === undefined) throw error;
      throw new HttpError(status, 'invalid_request', status === 413 ? 'The form was larger than this server accepts, so nothing was changed.' : 'The form could not be read, so nothing was changed.');
    }
    await next();
  };
}
