import type { Context, Middleware } from 'koa';

import type { Store } from '../../adapters/store.ts';
import type { Rate, RateLimits } from '../../config/index.ts';
import type { Logger } from '../shared/logger.ts';
import type { Principal } from '../resource/principal.ts';
import { ApiError } from '../shared/http_error.ts';
import { Counter } from './counter.ts';
import { SignIns } from './sign_ins.ts';
import { tokenRequestClientId } from '../http/token_request_client.ts';
import { inWords } from '../shared/words.ts';

export { SignIns } from './sign_ins.ts';

/**
 * Rate limits (issue 9 finding 5), counted in the store's rate limiters (shared across instances
 * on Redis, per process otherwise; adapters/rate_limiters.ts). Each endpoint answers an
 * over-limit request with 429 and `Retry-After` in its own format: the OAuth endpoints with RFC
 * 6749 JSON, the data API with its JSON errors, the sign-in form with the page (sign_ins.ts).
 */
export interface RateLimiting {
  /** POST /oauth/register: per client address. */
  registration: Middleware;
  /** POST /oauth/token: tokens issued per client_id, and requests per client address. */
  token: Middleware;
  /** The data API, after authentication: per credential. */
  dataApi: Middleware;
  /** The sign-in form: per address and per account, with locks. */
  signIns: SignIns;
}

const passThrough: Middleware = (_ctx, next) => next();

/** With `limits` undefined (RATE_LIMITS=off) nothing is limited; failed sign-ins are still logged. */
export function createRateLimits(limits: RateLimits | undefined, store: Store, logger: Logger): RateLimiting {
  const signIns = new SignIns(limits, store, logger);
  if (!limits) return { registration: passThrough, token: passThrough, dataApi: passThrough, signIns };
  const counter = (name: string, rate: Rate) => new Counter(store, { name, ...rate });
  return {
    registration: registrationLimit(counter('registration-address', limits.registration)),
    token: tokenLimit(counter('token-client', limits.tokenPerClient), counter('token-address', limits.tokenPerAddress)),
    dataApi: dataApiLimit(counter('data-api-credential', limits.dataApi)),
    signIns,
  };
}

function registrationLimit(perAddress: Counter): Middleware {
  return async (ctx, next) => {
    const wait = await perAddress.take(ctx.ip);
    if (wait === undefined) return next();
    answerOAuth(ctx, wait, `too many client registrations from this address (${describe(perAddress)})`);
  };
}

/**
 * Per address every request counts. Per client only the tokens it was issued count: a request
 * that names a client without its secret (or with a grant that is not valid) is answered by the
 * engine and uses up none of that client's allowance, so no one can lock a client out of its
 * tokens by knowing its (public) client_id. Concurrent requests may pass a client's limit by as
 * many as are in flight: the count is taken once the answer is known.
 */
function tokenLimit(perClient: Counter, perAddress: Counter): Middleware {
  return async (ctx, next) => {
    const clientId = await tokenRequestClientId(ctx);
    const [addressWait, clientWait] = await Promise.all([
      perAddress.take(ctx.ip),
      clientId === undefined ? undefined : perClient.waitIfSpent(clientId),
    ]);
    // Of two refusals, the longer wait is the one to tell.
    if (clientWait !== undefined && (addressWait === undefined || clientWait >= addressWait)) {
      answerOAuth(ctx, clientWait, `too many tokens issued to this client (${describe(perClient)})`);
    } else if (addressWait !== undefined) {
      answerOAuth(ctx, addressWait, `too many token requests from this address (${describe(perAddress)})`);
    } else {
      await next();
      if (clientId !== undefined && ctx.status >= 200 && ctx.status < 300) await perClient.add(clientId);
    }
  };
}

function dataApiLimit(perCredential: Counter): Middleware {
  return async (ctx, next) => {
    const principal = ctx.state.principal as Principal | undefined;
    const wait = principal && await perCredential.take(credentialKey(principal));
    if (wait === undefined) return next();
    throw new ApiError(429, 'too_many_requests', `too many requests with this credential (${describe(perCredential)}); retry after ${inWords(wait)}`, {
      'Retry-After': String(wait),
      'Access-Control-Expose-Headers': exposedWithRetryAfter(ctx),
    });
  };
}

/** One count per credential: a user's tokens for one client share it, as do a client's tokens, or an API key's requests. */
function credentialKey(principal: Principal): string {
  switch (principal.kind) {
    case 'user': return `user:${principal.userId}:${principal.clientId}`;
    case 'client': return `client:${principal.clientId}`;
    case 'api_key': return `key:${principal.keyId}`;
  }
}

/**
 * RFC 6749 defines no error for 429. `temporarily_unavailable` is its registered code for "cannot
 * handle the request now, try later" (4.1.2.1: temporary overloading), which stock clients treat
 * as retryable; the 429 status and Retry-After say it is this caller's rate. `slow_down`
 * (RFC 8628) belongs to device-flow polling, and a code of our own would be known to no client.
 */
function answerOAuth(ctx: Context, wait: number, description: string): void {
  ctx.status = 429;
  ctx.set('Retry-After', String(wait));
  ctx.set('Cache-Control', 'no-store');
  // A browser client reads the refusal and its Retry-After (the token endpoint's own CORS comes
  // from the engine, which is not reached); nothing in it is for one origin only, and no cookie
  // goes to these endpoints.
  if (ctx.get('Origin')) {
    if (!ctx.response.get('Access-Control-Allow-Origin')) ctx.set('Access-Control-Allow-Origin', '*');
    ctx.set('Access-Control-Expose-Headers', exposedWithRetryAfter(ctx));
  }
  ctx.body = { error: 'temporarily_unavailable', error_description: `${description}; retry after ${inWords(wait)}` };
}

/** A browser client may read Retry-After only if CORS exposes it. */
function exposedWithRetryAfter(ctx: Context): string {
  const exposed = ctx.response.get('Access-Control-Expose-Headers');
  return exposed ? `${exposed}, Retry-After` : 'Retry-After';
}

function describe({ rule }: Counter): string {
  return `at most ${rule.points} in ${inWords(rule.duration)}`;
}
