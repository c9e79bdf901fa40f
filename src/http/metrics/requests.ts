import type { Context } from 'koa';

import { INTERACTION_PATH } from '../../engine/routes.ts';
import { CONNECTION_CLOSED, type RequestObserver } from '../request_timing.ts';
import { oauthErrorOf } from './engine.ts';
import type { Metrics } from './metrics.ts';
import { routeTemplates } from './routes.ts';

const LOGIN_ROUTE = `${INTERACTION_PATH}/:uid/login`;

/**
 * Counts every request by route template, method and status, and times it; from the answer it
 * also counts what the answer says: an OAuth error (the JSON `error` of an /oauth/ endpoint, or
 * the error the authorization endpoint sent to the client or showed), a rate-limit refusal (every
 * 429 the service gives is one), a sign-in that failed (the form answered 401, or 429 when a rate
 * limit refused it). Told of the request by the one request timing (src/http/request_timing.ts), outside
 * the error mapping, so it sees the status the client got.
 */
export function countRequests(metrics: Metrics, basePath: string): RequestObserver {
  const routeOf = routeTemplates(basePath);
  return (ctx, ms, status) => {
    const route = routeOf(ctx);
    metrics.request(route, ctx.method, status, ms / 1000);
    // A request cut before its answer was refused nothing: what it would have been told never reached it.
    if (status >= 300 && status !== CONNECTION_CLOSED) countRefusals(metrics, ctx, route, status);
  };
}

function countRefusals(metrics: Metrics, ctx: Context, route: string, status: number): void {
  if (route.startsWith('/oauth/')) {
    // The body wins: the host corrects some of the engine's codes after it answered (src/http/endpoints/rfc6749_errors.ts).
    const code = (status >= 400 ? jsonErrorCode(ctx.body) : undefined) ?? oauthErrorOf(ctx);
    if (code !== undefined) metrics.oauthError(route, code);
  }
  if (status === 429) metrics.rateLimited(route);
  // A sign-in the form refused, or one a rate limit of the pages refused before the form saw it.
  const signInRefused = ctx.state.signInRefused ?? (route === LOGIN_ROUTE && ctx.method === 'POST' && status === 429 ? 'rate_limited' : undefined);
  if (signInRefused) metrics.loginFailed(signInRefused);
}

function jsonErrorCode(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || Buffer.isBuffer(body)) return undefined;
  const { error } = body as { error?: unknown };
  return typeof error === 'string' ? error : undefined;
}
