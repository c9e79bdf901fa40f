import type { Middleware, Context } from 'koa';

import { BackendUnavailableError } from '../../adapters/store.ts';
import type { Logger } from '../shared/logger.ts';
import { ENGINE_BODY_LIMIT } from '../engine/body_limit.ts';
import { PROBE_PATHS } from './health.ts';
import { METRICS_PATH } from './metrics/endpoint.ts';
import { requestIdOf } from './request_id.ts';

/** Seconds a client should wait before retrying when the storage backend is down. */
const RETRY_AFTER_SECONDS = 5;


export function isBackendOutage(error: unknown): boolean {
  for (let cause = error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof BackendUnavailableError) return true;
  }
  return false;
}

/** What the engine caught and answered with a 500 itself; kept so the host can answer 503 for outages. */
export function rememberEngineError(ctx: Context, error: unknown): void {
  ctx.state.engineError = error;
}

/**
 * Outermost but for the request id and log: no input yields a stack trace. Errors become RFC 6749
 * style JSON (`error`, `error_description`, and the `request_id` to quote, which the log lines of
 * the request carry); a storage outage is a 503 with Retry-After, anything unexpected a 500 whose
 * details go to the log only.
 */
export function errorMapping(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 400 && (ctx.request.length ?? 0) > ENGINE_BODY_LIMIT && ctx.response.is('json')) answerTooLarge(ctx);
      const engineError: unknown = ctx.state.engineError;
      if (engineError !== undefined && ctx.status >= 500) {
        if (isBackendOutage(engineError)) answerOutage(ctx);
        logServerError(logger, ctx, engineError);
      }
    } catch (error) {
      if (isBackendOutage(error)) {
        answerOutage(ctx);
        logServerError(logger, ctx, error);
        return;
      }
      const status = httpStatus(error);
      if (status && status < 500) {
        ctx.status = status;
        ctx.body = errorBody(ctx, 'invalid_request', (error as Error).message);
        return;
      }
      logServerError(logger, ctx, error);
      ctx.status = 500;
      ctx.body = errorBody(ctx, 'server_error', 'the server could not complete the request');
    }
  };
}

/**
 * The engine refuses an oversized body as unparseable (400); the host says what is wrong. Only
 * JSON answers are rewritten: a page (the authorization endpoint refusing a POST that is not a
 * form) stays the page the browser was shown.
 */
function answerTooLarge(ctx: Context): void {
  ctx.status = 413;
  ctx.body = errorBody(ctx, 'invalid_request', `the request body is larger than ${ENGINE_BODY_LIMIT / 1024} KiB`);
}

function answerOutage(ctx: Context): void {
  // Whatever the request set up (a session cookie) was not stored.
  ctx.remove('Set-Cookie');
  ctx.status = 503;
  ctx.set('Retry-After', String(RETRY_AFTER_SECONDS));
  ctx.set('Cache-Control', 'no-store');
  const body = errorBody(ctx, 'temporarily_unavailable', 'the storage backend is unavailable; try again shortly');
  ctx.body = ctx.accepts('json', 'html') === 'html' && ctx.method === 'GET'
    ? `Service temporarily unavailable; try again shortly.${body.request_id ? ` Reference: ${body.request_id}` : ''}`
    : body;
}

function errorBody(ctx: Context, error: string, description: string): { error: string; error_description: string; request_id?: string } {
  const id = requestIdOf(ctx);
  return { error, error_description: description, ...(id ? { request_id: id } : {}) };
}

function httpStatus(error: unknown): number | undefined {
  const status = (error as { status?: unknown; expose?: unknown }).status;
  return typeof status === 'number' && (error as { expose?: unknown }).expose === true ? status : undefined;
}

function logServerError(logger: Logger, ctx: Context, error: unknown): void {
  const err = error instanceof Error ? error : new Error(String(error));
  logger.error('request failed', { method: ctx.method, path: ctx.path, status: ctx.status, error: err.name, detail: err.message, stack: err.stack });
}

/**
 * One line per request: method, path (never the query, which can carry codes), status, duration
 * (and the request id, as every line written during the request). Probes (`/healthz`, `/readyz`)
 * and scrapes (`/metrics`) are logged at debug level: they come constantly.
 */
export function requestLog(logger: Logger): Middleware {
  return async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const log = PROBE_PATHS.has(ctx.path) || ctx.path === METRICS_PATH ? logger.debug : logger.info;
      // The client's address: the socket's, or with TRUST_PROXY=N the one N proxies back in X-Forwarded-For.
      log('request', { method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started), ip: ctx.ip });
    }
  };
}
