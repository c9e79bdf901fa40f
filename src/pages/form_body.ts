import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';

import { renderErrorPage } from './render.ts';

/** Reads a form body (at most 16 KiB); one it cannot read gets the error page, not the API's JSON error. */
export function formBody(): Middleware {
  const parse = bodyParser({ enableTypes: ['form'], formLimit: '16kb' });
  return async (ctx, next) => {
    try {
      await parse(ctx, async () => undefined);
    } catch (error) {
      const status = (error as { status?: unknown }).status;
      if (typeof status !== 'number' || status < 400 || status >= 500) throw error;
      ctx.status = status;
      return renderErrorPage(ctx, 'invalid_request', status === 413 ? 'The form was larger than this server accepts, so nothing was changed' : 'The form could not be read, so nothing was changed');
    }
    await next();
  };
}
