import type { RouterMiddleware } from '@koa/router';

import { HttpError } from '../shared/http_error.ts';

/**
 * The last step of an area of pages (the settings area, the sign-in and consent pages): a path
 * none of its pages answers gets the error page, headed and linking back like every page, not a
 * bare "Not Found"; a page asked for with a method it does not take gets 405, with `Allow`.
 */
export const noSuchPage: RouterMiddleware = (ctx) => {
  const methods = new Set((ctx.matched ?? []).flatMap((route) => route.methods));
  if (methods.size > 0) {
    throw new HttpError(405, 'invalid_request', 'This page cannot be reached that way.', { Allow: [...methods].join(', ') });
  }
  throw new HttpError(404, 'not_found', 'There is no such page. It may have moved, or the link may be incomplete.');
};
