import type { Context } from 'koa';
import { errors } from 'oidc-provider';

import type { Refusal } from '../rate_limits/limits.ts';

/**
 * A rate limit's refusal, thrown from a step the engine runs (where the host cannot answer for
 * it): RFC 6749's code for "try again later", as the host's other 429s (src/rate_limits/limits.ts),
 * with `Retry-After`, which the engine's error handler keeps. Never redirected to the client: the
 * refusal says nothing about the client's request, and may concern a client no one vetted; the
 * authorization endpoint answers it with its error page.
 */
export function refusedByLimit(ctx: Context, refusal: Refusal): LimitRefusal {
  ctx.set('Retry-After', String(refusal.retryAfter));
  return new LimitRefusal(refusal);
}

/** The engine error a limit's refusal is thrown as; the error page reads the person's words from it. */
export class LimitRefusal extends errors.CustomOIDCProviderError {
  readonly inWordsOfThePerson: string;

  constructor(refusal: Refusal) {
    super('temporarily_unavailable', refusal.description);
    this.status = 429;
    this.statusCode = 429;
    this.allow_redirect = false;
    this.inWordsOfThePerson = refusal.inWordsOfThePerson;
  }
}
