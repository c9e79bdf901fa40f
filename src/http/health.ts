import type { JWK } from 'jose';
import type { Context, Middleware } from 'koa';

import type { Store } from '../../adapters/store.ts';
import { noStore } from '../shared/no_store.ts';

/** Paths polled by load balancers and orchestrators: answered cheaply, logged at debug level only. */
export const PROBE_PATHS = new Set(['/healthz', '/readyz']);

/** How long readiness waits for the store: a hung store makes the probe answer 503 now, not at the prober's timeout. */
const READY_TIMEOUT_MS = 1000;

/**
 * `GET /healthz`, liveness: 200 whenever the process can answer, whatever the store does. An
 * orchestrator restarts an instance that fails it, and restarting every instance during a Redis
 * blip would help nothing.
 *
 * `GET /readyz`, readiness: 200 only when the store answers within READY_TIMEOUT_MS and the
 * service holds signing keys; otherwise 503 naming what is wrong. A load balancer takes an
 * instance that fails it out of rotation until it passes again.
 */
export function health(store: Store, jwks: { keys: JWK[] }): Middleware {
  const keysLoaded = canSign(jwks);
  return async (ctx, next) => {
    if (!PROBE_PATHS.has(ctx.path) || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    ctx.state.route = ctx.path;
    noStore(ctx);
    if (ctx.path === '/healthz') {
      ctx.body = { status: 'ok' };
      return;
    }
    answerReadiness(ctx, await storeAnswers(store), keysLoaded);
  };
}

function answerReadiness(ctx: Context, storeOk: boolean, keysLoaded: boolean): void {
  const checks = { store: storeOk ? 'ok' : 'unavailable', keys: keysLoaded ? 'loaded' : 'missing' };
  if (storeOk && keysLoaded) {
    ctx.body = { status: 'ready', ...checks };
    return;
  }
  ctx.status = 503;
  ctx.body = {
    status: 'not ready',
    ...checks,
    error: 'temporarily_unavailable',
    error_description: storeOk ? 'no signing keys are loaded' : 'the storage backend is not answering',
  };
}

async function storeAnswers(store: Store): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS); });
  try {
    return await Promise.race([store.ping().then(() => true, () => false), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** A private key for each algorithm the service signs with: ES256 (access tokens) and RS256 (ID tokens). */
function canSign(jwks: { keys: JWK[] }): boolean {
  const signs = (kty: string) => jwks.keys.some((key) => key.kty === kty && typeof key.d === 'string');
  return signs('EC') && signs('RSA');
}
