import type { JWK } from 'jose';
import type { Context, Middleware } from 'koa';

import { BackendUnavailableError, type Store } from '../../adapters/store.ts';
import { noStore } from '../shared/no_store.ts';

/** Paths polled by load balancers and orchestrators: answered cheaply, logged at debug level only. */
export const PROBE_PATHS = new Set(['/healthz', '/readyz']);

/** How long readiness waits for the store: a hung store makes the probe answer 503 now, not at the prober's timeout. */
const READY_TIMEOUT_MS = 1000;

/** What `/readyz` reports: ready when the store answers and signing keys are loaded; otherwise what is wrong. */
export interface Readiness {
  store: 'ok' | 'unavailable';
  keys: 'loaded' | 'missing';
  /** Why the instance is not ready, in words; undefined when it is. */
  problem?: string;
}

/**
 * `GET /healthz`, liveness: 200 whenever the process can answer, whatever the store does. An
 * orchestrator restarts an instance that fails it, and restarting every instance during a Redis
 * blip (or while Redis is still starting) would help nothing.
 *
 * `GET /readyz`, readiness: 200 when `readiness` finds the instance ready, otherwise 503 naming
 * what is wrong. A load balancer takes an instance that fails it out of rotation until it passes
 * again. The service's readiness is serviceReadiness; before the store has answered once, it is
 * startingReadiness (src/http/starting.ts).
 */
export function health(readiness: () => Promise<Readiness>): Middleware {
  const probe = async (ctx: Context) => {
    ctx.state.route = ctx.path;
    noStore(ctx);
    if (ctx.path === '/healthz') {
      ctx.body = { status: 'ok' };
      return;
    }
    answerReadiness(ctx, await readiness());
  };
  // Not async itself: every other request passes with one check, and no promise of its own.
  return (ctx, next) => (PROBE_PATHS.has(ctx.path) && (ctx.method === 'GET' || ctx.method === 'HEAD') ? probe(ctx) : next());
}

/** Ready when the store answers within READY_TIMEOUT_MS and the service holds a signing key for each algorithm. */
export function serviceReadiness(store: Store, jwks: { keys: JWK[] }): () => Promise<Readiness> {
  const keys = canSign(jwks) ? 'loaded' : 'missing';
  return async () => {
    const problem = await storeProblem(store);
    if (problem) return { store: 'unavailable', keys, problem: `the ${storeName(store)} store ${problem}` };
    return keys === 'loaded' ? { store: 'ok', keys } : { store: 'ok', keys, problem: 'no signing keys are loaded' };
  };
}

/** Before the store has answered once: the keys are kept in it, so neither is there yet. */
export function startingReadiness(store: Store): () => Promise<Readiness> {
  const readiness: Readiness = { store: 'unavailable', keys: 'missing', problem: `the ${storeName(store)} store has not answered since the service started; retrying` };
  return () => Promise.resolve(readiness);
}

/** The store's kind as people write it, for messages. */
export function storeName(store: Store): string {
  return { redis: 'Redis', sqlite: 'SQLite', memory: 'in-memory' }[store.kind];
}

function answerReadiness(ctx: Context, { problem, ...checks }: Readiness): void {
  if (problem === undefined) {
    ctx.body = { status: 'ready', ...checks };
    return;
  }
  ctx.status = 503;
  ctx.body = { status: 'not ready', ...checks, error: 'temporarily_unavailable', error_description: problem };
}

/** What is wrong with the store, in words that follow its name: undefined when it answers (and, Redis, takes writes). */
async function storeProblem(store: Store): Promise<string | undefined> {
  const notAnswering = 'is not answering';
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<string>((resolve) => { timer = setTimeout(() => resolve(notAnswering), READY_TIMEOUT_MS); });
  const checked = store.ping().then(() => undefined, (error: unknown) => {
    // Only the store's own word for it: the rest of its message is for the log, not a public probe.
    const refusal = error instanceof BackendUnavailableError ? error.refusal : undefined;
    return refusal ? `answers but refuses what the service asks of it (${refusal})` : notAnswering;
  });
  try {
    return await Promise.race([checked, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** A private key for each algorithm the service signs with: ES256 (access tokens) and RS256 (ID tokens). */
function canSign(jwks: { keys: JWK[] }): boolean {
  const signs = (kty: string) => jwks.keys.some((key) => key.kty === kty && typeof key.d === 'string');
  return signs('EC') && signs('RSA');
}
