import { createHash, timingSafeEqual } from 'node:crypto';

import type { Context, Middleware } from 'koa';

import type { Logger } from '../../shared/logger.ts';
import type { Metrics } from './metrics.ts';

/** At the origin's root, like the probes, whatever the issuer's path. */
export const METRICS_PATH = '/metrics';

const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * `GET /metrics`: the Prometheus text exposition. With METRICS_TOKEN only for a request that
 * presents it as a bearer token (RFC 6750; 401 with the challenge otherwise). Not rate limited
 * and logged at debug level only: a scraper comes every few seconds.
 */
export function metricsEndpoint(metrics: Metrics, token: string | undefined, logger: Logger): Middleware {
  const expected = token === undefined ? undefined : digest(token);
  return async (ctx, next) => {
    if (ctx.path !== METRICS_PATH) return next();
    ctx.set('Cache-Control', 'no-store');
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.status = 405;
      ctx.set('Allow', 'GET, HEAD');
      ctx.body = { error: 'method_not_allowed', error_description: 'metrics are read with GET' };
      return;
    }
    if (expected && !authorized(ctx, expected)) return;
    try {
      ctx.body = await metrics.scrape();
      ctx.type = CONTENT_TYPE;
    } catch (error) {
      logger.warn('could not gather the metrics', { error: (error as Error).message });
      ctx.status = 503;
      ctx.body = { error: 'temporarily_unavailable', error_description: 'the metrics could not be gathered; try again shortly' };
    }
  };
}

/** Compares digests in constant time: the token's length and content stay unknown to a caller. */
function authorized(ctx: Context, expected: Buffer): boolean {
  const presented = /^Bearer +(\S+)$/i.exec(ctx.get('Authorization'))?.[1];
  if (presented !== undefined && timingSafeEqual(digest(presented), expected)) return true;
  ctx.status = 401;
  if (presented === undefined) {
    ctx.set('WWW-Authenticate', 'Bearer realm="metrics"');
    ctx.body = { error: 'invalid_request', error_description: 'the metrics need the METRICS_TOKEN as a bearer token' };
  } else {
    ctx.set('WWW-Authenticate', 'Bearer realm="metrics", error="invalid_token"');
    ctx.body = { error: 'invalid_token', error_description: 'the bearer token is not the METRICS_TOKEN' };
  }
  return false;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
