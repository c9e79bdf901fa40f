import { setTimeout as sleep } from 'node:timers/promises';

import Koa from 'koa';

import type { Store } from '../../adapters/store.ts';
import type { Config } from '../../config/index.ts';
import type { Logger } from '../shared/logger.ts';
import { answerUnavailable, errorMapping, isBackendOutage, logConnectionErrors } from './errors.ts';
import { health, startingReadiness, storeName } from './health.ts';
import type { Metrics } from './metrics/metrics.ts';
import { countRequests } from './metrics/requests.ts';
import { requestId } from './request_id.ts';
import { logRequests } from './request_log.ts';
import { timeRequests } from './request_timing.ts';
import { securityHeaders } from './security_headers.ts';

/** The first pause before asking the store again; each pause doubles, up to LONGEST_RETRY_MS. */
const FIRST_RETRY_MS = 500;
/** Short enough that the service is ready within seconds of the store answering, long enough to log a line only every few seconds. */
const LONGEST_RETRY_MS = 10_000;

export interface StartingDependencies {
  config: Config;
  store: Store;
  logger: Logger;
  metrics: Metrics | undefined;
}

/**
 * What answers on PORT while the store has not answered since start (the keys and the revocation
 * list are read from it): `/healthz` 200 (the process is fine), `/readyz` 503 naming the store,
 * and every other request 503 with Retry-After, as during an outage of the store. Requests are
 * logged and counted as the service's are.
 */
export function startingService({ config, store, logger, metrics }: StartingDependencies): Koa {
  const description = `the service is starting: the ${storeName(store)} store does not answer yet; try again shortly`;
  const app = new Koa({ proxy: config.proxyHops > 0, maxIpsCount: config.proxyHops });
  app.use(requestId(config.proxyHops > 0));
  app.use(timeRequests([logRequests(logger), ...(metrics ? [countRequests(metrics, config.basePath)] : [])]));
  logConnectionErrors(app, logger);
  app.use(errorMapping(logger));
  app.use(securityHeaders([]));
  app.use(health(startingReadiness(store)));
  app.use(answerUnavailable(description));
  return app;
}

export interface WaitOptions {
  logger: Logger;
  /** Aborted when the service is told to stop while it waits. */
  signal: AbortSignal;
  /** Run once, when the first attempt has failed: what to do while waiting (listen, so the probes are answered). */
  whileWaiting: () => Promise<void>;
}

/**
 * Runs `attempt` (what start-up reads from the store) until the store answers it. Each time the
 * store does not, one warning line (no stack: the store being down is not a bug), then a pause
 * doubling from FIRST_RETRY_MS to LONGEST_RETRY_MS; after the first, `whileWaiting`. Any other
 * failure (a key that opens nothing stored, a port in use) is thrown at once. Undefined when
 * `signal` aborts first.
 */
export async function whenStoreAnswers<T>(store: Store, attempt: () => Promise<T>, { logger, signal, whileWaiting }: WaitOptions): Promise<T | undefined> {
  const name = storeName(store);
  let pause = FIRST_RETRY_MS;
  for (let attempts = 1; ; attempts += 1) {
    try {
      const result = await attempt();
      if (signal.aborted) return undefined;
      if (attempts > 1) logger.info(`the ${name} store answers; serving`, { attempts });
      return result;
    } catch (error) {
      if (signal.aborted) return undefined;
      if (!isBackendOutage(error)) throw error;
      logger.warn(`the ${name} store does not answer yet; requests are answered 503 until it does`, {
        attempt: attempts, retry_in_ms: pause, reason: (error as Error).message,
      });
    }
    if (attempts === 1 && !signal.aborted) await whileWaiting();
    try {
      await sleep(pause, undefined, { signal });
    } catch {
      return undefined;
    }
    pause = Math.min(pause * 2, LONGEST_RETRY_MS);
  }
}
