import type { Middleware } from 'koa';

import type { Store } from '../../adapters/store.ts';

/** Paths polled by load balancers and orchestrators: answered cheaply, logged at debug level only. */
export const PROBE_PATHS = new Set(['/healthz', '/readyz']);

/**
 * `GET /healthz` and `GET /readyz`: 200 when the store answers, 503 when it does not. A serving
 * process has its keys (they are loaded before it listens); `/readyz` says so, and is the probe
 * to take an instance out of a load balancer's rotation while its store is unreachable.
 */
export function health(store: Store): Middleware {
  return async (ctx, next) => {
    if (!PROBE_PATHS.has(ctx.path) || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    ctx.set('Cache-Control', 'no-store');
    const ready = ctx.path === '/readyz';
    try {
      await store.ping();
      ctx.body = ready ? { status: 'ready', store: 'ok', keys: 'loaded' } : { status: 'ok' };
    } catch {
      ctx.status = 503;
      ctx.body = {
        status: ready ? 'not ready' : 'unavailable',
        ...(ready ? { store: 'unavailable', keys: 'loaded' } : {}),
        error: 'temporarily_unavailable',
        error_description: 'the storage backend is not answering',
      };
    }
  };
}
