import { randomUUID } from 'node:crypto';

import type { Context, Middleware } from 'koa';

import { withLogFields } from '../shared/logger.ts';

/** What an incoming id may be: short, and nothing that could break a log line or a header. */
const SAFE_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * The outermost middleware: every request gets an id, answered in `X-Request-Id` and carried by
 * every log line written while it is served (the request line, the engine's refusals, errors).
 * A proxy in front (TRUST_PROXY) may have named the request already: its `X-Request-Id` is kept
 * when it is safe, so one id follows the request through both. Without a trusted proxy a
 * client's header is ignored: anyone could otherwise plant ids in the log.
 */
export function requestId(trustIncoming: boolean): Middleware {
  return (ctx, next) => {
    const incoming = trustIncoming ? ctx.get('X-Request-Id') : '';
    const id = SAFE_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = id;
    ctx.set('X-Request-Id', id);
    return withLogFields({ request_id: id }, next);
  };
}

/** The request's id, for answers that tell the user what to quote when asking for help. */
export function requestIdOf(ctx: Context): string | undefined {
  const id: unknown = ctx.state.requestId;
  return typeof id === 'string' ? id : undefined;
}
