import type Koa from 'koa';
import type { Context, Middleware } from 'koa';

import { BackendUnavailableError } from '../../adapters/store.ts';
import { ENGINE_BODY_LIMIT } from '../engine/body_limit.ts';
import { oidcOf } from '../engine/context.ts';
import { renderErrorPage } from '../pages/render.ts';
import { errorDescriptionFor, inErrorDescriptionCharset } from '../shared/error_description.ts';
import { HttpError } from '../shared/http_error.ts';
import type { Logger } from '../shared/logger.ts';
import { noStore } from '../shared/no_store.ts';
import { loggedPath } from './logged_path.ts';
import { requestIdOf } from './request_id.ts';

/** Seconds a client should wait before retrying when the storage backend is down. */
const RETRY_AFTER_SECONDS = 5;

/**
 * How a refusal is answered: `json` (`{ error, error_description, request_id }`, the shape of RFC
 * 6749 section 5.2, for the OAuth endpoints and the data API alike) unless a section of pages
 * says `page` (the error page a browser shows).
 */
export type ErrorFormat = 'json' | 'page';

/** Marks every request below as one whose refusals are answered in `format`. */
export function answerErrorsAs(format: ErrorFormat): Middleware {
  return (ctx, next) => {
    ctx.state.errorFormat = format;
    return next();
  };
}

export function isBackendOutage(error: unknown): boolean {
  return outageIn(error) !== undefined;
}

/** The store's own error within what a request failed with (the engine may wrap it), if it was an outage. */
function outageIn(error: unknown): BackendUnavailableError | undefined {
  for (let cause = error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof BackendUnavailableError) return cause;
  }
  return undefined;
}

/** What the engine caught and answered with a 500 itself; kept so the host can answer 503 for outages. */
export function rememberEngineError(ctx: Context, error: unknown): void {
  ctx.state.engineError = error;
}

/** What the engine refused a request with (a 4xx); kept so the host can answer a body too large with 413. */
export function rememberEngineRefusal(ctx: Context, error: unknown): void {
  ctx.state.engineRefusal = error;
}

/**
 * The one place refusals are written, outermost but for the request id and its timing: no input
 * yields a stack trace. An HttpError thrown anywhere below is answered with its status and headers
 * in the request's format (ErrorFormat), never cached, and so is one the engine caught from its
 * adapter (answered by the engine as a 500); a storage outage is a 503 with Retry-After;
 * anything unexpected a 500 whose details go to the log only. Every JSON body carries the
 * `request_id` to quote, which the log lines of the request carry too.
 */
export function errorMapping(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await mapErrors(ctx, next, logger);
    } finally {
      exposeRetryAfter(ctx);
    }
  };
}

async function mapErrors(ctx: Context, next: () => Promise<unknown>, logger: Logger): Promise<void> {
  try {
    await next();
    if (isEngineBodyTooLarge(ctx)) answerTooLarge(ctx);
    const engineError: unknown = ctx.state.engineError;
    if (engineError instanceof HttpError && ctx.status >= 500) {
      // A refusal from below the engine (its storage adapter): answered as thrown, nothing failed.
      await answer(ctx, engineError);
    } else if (engineError !== undefined && ctx.status >= 500) {
      const outage = outageIn(engineError);
      if (outage) {
        await answerOutageIn(ctx);
        logOutage(logger, ctx, outage);
      } else {
        logServerError(logger, ctx, engineError);
      }
    }
    if (ctx.status >= 400) finishEngineErrorBody(ctx);
  } catch (error) {
    const outage = outageIn(error);
    if (outage) {
      await answerOutageIn(ctx);
      logOutage(logger, ctx, outage);
      return;
    }
    const refusal = asRefusal(error);
    // Logged with the status it is answered with: what the request had reached when it failed is no answer.
    if (!refusal) logServerError(logger, ctx, error, 500);
    await answer(ctx, refusal ?? new HttpError(500, 'server_error', 'the server could not complete the request'));
  }
}

/**
 * A browser client reads Retry-After, which every 429 and 503 carries, only when CORS exposes it:
 * exposed on every answer a page on another origin may read (Access-Control-Allow-Origin set).
 */
function exposeRetryAfter(ctx: Context): void {
  if (!ctx.response.get('Retry-After') || !ctx.response.get('Access-Control-Allow-Origin')) return;
  // Koa answers undefined for a header not set, whatever its types say.
  const exposed = String(ctx.response.get('Access-Control-Expose-Headers') ?? '');
  if (exposed.split(',').some((name) => name.trim().toLowerCase() === 'retry-after')) return;
  ctx.set('Access-Control-Expose-Headers', exposed ? `${exposed}, Retry-After` : 'Retry-After');
}

/** An HttpError, or a 4xx that a library (the body parser) threw for the client to see, as one. */
function asRefusal(error: unknown): HttpError | undefined {
  if (error instanceof HttpError) return error;
  const { status, expose } = error as { status?: unknown; expose?: unknown };
  if (typeof status === 'number' && status < 500 && expose === true) return new HttpError(status, 'invalid_request', (error as Error).message);
  return undefined;
}

async function answer(ctx: Context, refusal: HttpError): Promise<void> {
  ctx.status = refusal.status;
  // Named in the request line (request_log.ts): two refusals of one status tell apart there.
  ctx.state.refusal = refusal.code;
  for (const [name, value] of Object.entries(refusal.headers)) ctx.set(name, value);
  noStore(ctx);
  if (ctx.state.errorFormat === 'page') {
    await renderErrorPage(ctx, refusal.code, refusal.description);
    return;
  }
  ctx.body = errorBody(ctx, refusal.code, refusal.description);
}

/**
 * The engine refuses an oversized body as unparseable (400); the host says what is wrong. Only at
 * the engine's routes (it made its context for the request), where its limit applies: the host's
 * own APIs (`/rest`, `/mcp`) take larger bodies and say themselves what is wrong with one. And
 * only JSON answers: a page (the authorization endpoint refusing a POST that is not a form) stays
 * the page the browser was shown.
 */
function isEngineBodyTooLarge(ctx: Context): boolean {
  if (ctx.status !== 400 || !ctx.response.is('json') || oidcOf(ctx) === undefined) return false;
  // Declared too large, or sent without a length (chunked) and found too large as the engine read it.
  const refusal = ctx.state.engineRefusal;
  const readTooLarge = refusal instanceof Error && refusal.cause instanceof Error && refusal.cause.message === ENGINE_BODY_TOO_LARGE;
  return (ctx.request.length ?? 0) > ENGINE_BODY_LIMIT || readTooLarge;
}

/** The message of the error the engine's body reader stops a body past its limit with, which it then answers as a 400. */
const ENGINE_BODY_TOO_LARGE = 'request entity too large';

/** What the host says of a body too large for the engine. */
function answerTooLarge(ctx: Context): void {
  ctx.status = 413;
  ctx.body = errorBody(ctx, 'invalid_request', `the request body is larger than ${ENGINE_BODY_LIMIT / 1024} KiB`);
}

/**
 * Answers every request as a storage outage is answered (503 with Retry-After), saying
 * `description`: what the service answers while it waits for its store at start
 * (src/http/starting.ts). Nothing failed that the log should hear of: nothing is logged.
 */
export function answerUnavailable(description: string): Middleware {
  return (ctx) => {
    answerOutage(ctx, description);
  };
}

/**
 * A storage outage, answered in the request's format: a person who sent a page's form (signing in,
 * an authorization request posted) or opened a page gets the error page, saying to try again in a
 * moment; anyone else the JSON or the short text answerOutage writes.
 */
async function answerOutageIn(ctx: Context): Promise<void> {
  answerOutage(ctx);
  if (ctx.state.errorFormat !== 'page') return;
  const { body, type } = ctx;
  try {
    await renderErrorPage(ctx, 'temporarily_unavailable');
  } catch {
    // The short answer already written stands.
    ctx.body = body;
    ctx.type = type;
  }
}

function answerOutage(ctx: Context, description = 'the storage backend is unavailable; try again shortly'): void {
  // Whatever the request set up (a session cookie) was not stored, nor what a redirect would lead to.
  ctx.remove('Set-Cookie');
  ctx.remove('Location');
  ctx.status = 503;
  ctx.set('Retry-After', String(RETRY_AFTER_SECONDS));
  noStore(ctx);
  const body = errorBody(ctx, 'temporarily_unavailable', description);
  ctx.body = ctx.accepts('json', 'html') === 'html' && ctx.method === 'GET'
    ? `Service temporarily unavailable; try again shortly.${body.request_id ? ` Reference: ${body.request_id}` : ''}`
    : body;
}

/**
 * An error the engine answered in JSON (an OAuth error: `error` a string) is finished as every
 * refusal written here is: it carries the `request_id`, and an `error_description` (the engine
 * leaves a few without one) in only the characters RFC 6749 section 5.2 allows (the engine's texts
 * and the host's steps within it may echo what was sent). Not a JSON-RPC error (`/mcp`), whose members are fixed.
 */
function finishEngineErrorBody(ctx: Context): void {
  const body: unknown = ctx.body;
  if (!body || typeof body !== 'object' || Buffer.isBuffer(body)) return;
  const error = body as { error?: unknown; error_description?: unknown; request_id?: unknown };
  if (typeof error.error !== 'string') return;
  const description = errorDescriptionFor(error.error, typeof error.error_description === 'string' ? error.error_description : undefined);
  if (description !== undefined) error.error_description = description;
  const id = requestIdOf(ctx);
  if (id && !('request_id' in error)) error.request_id = id;
}

function errorBody(ctx: Context, error: string, description: string): { error: string; error_description: string; request_id?: string } {
  const id = requestIdOf(ctx);
  return { error, error_description: inErrorDescriptionCharset(description), ...(id ? { request_id: id } : {}) };
}

/**
 * A request the store's outage refused, which the service answered as designed (503, Retry-After):
 * a warning naming the store's refusal, without a stack, which is for faults of the service's own.
 * Every request of an outage gets one, so that each 503 answered has its reason in the log.
 */
function logOutage(logger: Logger, ctx: Context, outage: BackendUnavailableError): void {
  logger.warn('request failed', {
    method: ctx.method, path: loggedPath(ctx.path), status: ctx.status, error: outage.name, detail: outage.message, refusal: outage.refusal,
  });
}

function logServerError(logger: Logger, ctx: Context, error: unknown, status = ctx.status): void {
  const err = error instanceof Error ? error : new Error(String(error));
  logger.error('request failed', { method: ctx.method, path: loggedPath(ctx.path), status, error: err.name, detail: err.message, stack: err.stack });
}

/**
 * What goes wrong once an answer is under way, past the error mapping: mostly a client that closed
 * the connection before its request's body or its answer ended. Koa would write it to stderr as a
 * stack trace among the JSON log lines; it is a log line of the request instead, at info (a client
 * going away is routine). Anything else that reaches Koa is a fault of the service's: an error line.
 */
export function logConnectionErrors(app: Koa, logger: Logger): void {
  app.on('error', (error: Error & { headerSent?: boolean }, ctx?: Context) => {
    const request = { request_id: ctx ? requestIdOf(ctx) : undefined, method: ctx?.method, path: ctx && loggedPath(ctx.path) };
    // The answer's side: a request whose body was read is `destroyed` once read, connection or not.
    if (error.headerSent || ctx?.res.destroyed) logger.info('connection closed before the answer ended', { ...request, detail: error.message });
    else logger.error('request failed', { ...request, error: error.name, detail: error.message, stack: error.stack });
  });
}
