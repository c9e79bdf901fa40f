import type { Middleware } from 'koa';

import type { Store } from '../../adapters/store.ts';

/** `GET /healthz`: 200 when the store answers, 503 when it does not (for load balancers and orchestrators). */
export function health(store: Store): Middleware {
  return async (ctx, next) => {
    if (ctx.path !== '/healthz' || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    ctx.set('Cache-Control', 'no-store');
    try {
      await store.ping();
      ctx.body = { status: 'ok' };
    } catch {
      ctx.status = 503;
      ctx.body = { status: 'unavailable', error: 'temporarily_unavailable', error_description: 'the storage backend is not answering' };
    }
  };
}
