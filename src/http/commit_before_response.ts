import type { Middleware } from 'koa';

import type { Store } from '../../adapters/store.ts';

/**
 * Holds every response until the store has made durable what the request wrote (the SQLite store
 * commits writes in groups), so no client is told of a code, token or registration that is then
 * lost. A failed commit throws the store's outage error, which the error mapping around this
 * middleware answers with 503: none of the request's writes was kept.
 */
export function commitBeforeResponse(store: Store): Middleware {
  return async (_ctx, next) => {
    await next();
    await store.committed();
  };
}
