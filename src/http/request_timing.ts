import type { Context, Middleware } from 'koa';

/** Told of every request once it is answered, with how long it took (milliseconds): the request log, the metrics. */
export type RequestObserver = (ctx: Context, ms: number) => void;

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
      for (const observe of observers) observe(ctx, ms);
    }
  };
}
