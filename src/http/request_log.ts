import type { Logger } from '../shared/logger.ts';
import { PROBE_PATHS } from './health.ts';
import { loggedPath } from './logged_path.ts';
import { METRICS_PATH } from './metrics/endpoint.ts';
import type { RequestObserver } from './request_timing.ts';

/**
 * One line per request: method, path (never the query, which can carry codes; a long segment as
 * its length: loggedPath), status, duration, the address, and for a refusal of the host's its
 * code as `error` (`cross_site_form`, `invalid_request`: the one the answer names)
 * (and the request id, as every line written during the request). Probes (`/healthz`, `/readyz`)
 * and scrapes (`/metrics`) are logged at debug level: they come constantly.
 */
export function logRequests(logger: Logger): RequestObserver {
  return (ctx, ms, status) => {
    const log = PROBE_PATHS.has(ctx.path) || ctx.path === METRICS_PATH ? logger.debug : logger.info;
    // The client's address: the socket's, or with TRUST_PROXY=N the one N proxies back in X-Forwarded-For.
    const refusal = ctx.state.refusal;
    log('request', { method: ctx.method, path: loggedPath(ctx.path), status, ms: Math.round(ms), ip: ctx.ip, ...(refusal ? { error: refusal } : {}) });
  };
}
