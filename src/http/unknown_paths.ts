import type { Context } from 'koa';

import { notFound } from '../shared/http_error.ts';

/**
 * What a path nothing of the service answers gets, as the last step of the stack: a browser the
 * error page, headed and linking home like every page; any other client the JSON error every API
 * refusal is. Never the bare "Not Found" Koa would send.
 */
export function unknownPath(ctx: Context): never {
  if (ctx.accepts('json', 'html') === 'html') {
    ctx.state.errorFormat = 'page';
    throw notFound('There is no such page. It may have moved, or the link may be incomplete.');
  }
  // The path as asked for: an alias (src/http/discovery.ts) has been rewritten on the way down.
  const asked = ctx.originalUrl.split('?')[0]!;
  throw notFound(`nothing is served at ${asked.slice(0, 200)}; the service's endpoints are in its discovery document`);
}
