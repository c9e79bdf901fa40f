import { createHash, timingSafeEqual } from 'node:crypto';

import type { Context, Middleware } from 'koa';

import { HttpError } from '../../shared/http_error.ts';
import type { Logger } from '../../shared/logger.ts';
import { noStore } from '../../shared/no_store.ts';

/** At the origin's root, like the probes, whatever the issuer's path. */
export const METRICS_PATH = '/metrics';

const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * `GET /metrics`: the Prometheus text exposition `scrape` gives (this process's metrics, or every
 * worker's). With METRICS_TOKEN only for a request that presents it as a bearer token (RFC 6750;
 * 401 with the challenge otherwise). Not rate limited and logged at debug level only: a scraper
 * comes every few seconds.
 */
export function metricsEndpoint(scrape: () => Promise<string>, token: string | undefined, logger: Logger): Middleware {
  const expected = token === undefined ? undefined : digest(token);
  return async (ctx, next) => {
    if (ctx.path !== METRICS_PATH) return next();
    ctx.state.route = METRICS_PATH;
    noStore(ctx);
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      throw new HttpError(405, 'method_not_allowed', 'metrics are read with GET', { Allow: 'GET, HEAD' });
    }
    if (expected) checkToken(ctx, expected);
    try {
      ctx.body = await scrape();
      ctx.type = CONTENT_TYPE;
    } catch (error) {
      logger.warn('could not gather the metrics', { error: (error as Error).message });
      throw new HttpError(503, 'temporarily_unavailable', 'the metrics could not be gathered; try again shortly');
    }
  };
}

/** Compares digests in constant time: the token's length and content stay unknown to a caller. */
function checkToken(ctx: Context, expected: Buffer): void {
  const presented = /^Bearer +(\S+)$/i.exec(ctx.get('Authorization'))?.[1];
  if (presented !== undefined && timingSafeEqual(digest(presented), expected)) return;
  if (presented === undefined) {
    throw new HttpError(401, 'invalid_request', 'the metrics need the METRICS_TOKEN as a bearer token', { 'WWW-Authenticate': 'Bearer realm="metrics"' });
  }
  throw new HttpError(401, 'invalid_token', 'the bearer token is not the METRICS_TOKEN', { 'WWW-Authenticate': 'Bearer realm="metrics", error="invalid_token"' });
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
