import type { Context, Middleware } from 'koa';

/**
 * Told of every request once it is answered, with how long it took (milliseconds) and the status
 * the client got: the request log, the metrics.
 */
export type RequestObserver = (ctx: Context, ms: number, status: number) => void;

/**
 * The status of a request whose connection closed before its answer could be sent: the client went
 * away, or the service cut it at the end of its shutdown grace. No answer reached the client, and
 * the one the service would have given (a 400 for a body that never ended) is not what happened;
 * 499 is nginx's code for it, which dashboards know.
 */
export const CONNECTION_CLOSED = 499;

/**
 * Times every request once, outside the error mapping (so the status is the one the client got),
 * and tells each observer. One clock read when the request comes in and one when it is answered,
 * whatever the number of observers.
 */
export function timeRequests(observers: readonly RequestObserver[]): Middleware {
  return async (ctx, next) => {
    const started = performance.now();
    // Read while the socket is there (Koa keeps it for the observers): a client gone by the answer has no address left.
    void ctx.ip;
    try {
      await next();
    } finally {
      const ms = performance.now() - started;
      const status = ctx.res.destroyed ? CONNECTION_CLOSED : ctx.status;
      for (const observe of observers) observe(ctx, ms, status);
    }
  };
}
