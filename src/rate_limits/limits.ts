import type { Context, Middleware } from 'koa';

import type { Rate, RateLimits } from '../../config/index.ts';
import { HttpError } from '../shared/http_error.ts';
import type { Logger } from '../shared/logger.ts';
import { inWords } from '../shared/words.ts';
import { addressKey } from './addresses.ts';
import type { Counter, Counters } from './counter.ts';
import type { KnownDevices } from './known_devices.ts';
import { SignIns } from './sign_ins.ts';

export { SignIns } from './sign_ins.ts';
export { COUNTED_KEYS_PURPOSE, Counters } from './counter.ts';
export { KNOWN_DEVICES_PURPOSE, KnownDevices } from './known_devices.ts';

/**
 * Rate limits, counted in the store's rate limiters (shared across instances on Redis, per process
 * otherwise; adapters/rate_limiters.ts). An over-limit request is refused with 429 and
 * `Retry-After` (an HttpError, which the host answers in the endpoint's format); the sign-in form
 * says it on its page (sign_ins.ts). Where each limit runs: src/http/endpoints/ and src/http/app.ts.
 * Every per-address limit counts a client address as addressKey() does (addresses.ts): an IPv6
 * network of RATE_LIMIT_IPV6_PREFIX bits is one address.
 */
export interface RateLimiting {
  /** POST /oauth/register: per client address. */
  registration: Middleware;
  /** POST /oauth/token: tokens issued per client_id, and requests per client address. */
  token: Middleware;
  /** POST /oauth/par, as the token endpoint: requests pushed per client_id, and requests per client address (the token endpoint's rates, counted apart). */
  pushedAuthorization: Middleware;
  /** The data API and /mcp, after authentication: per credential. */
  dataApi: Middleware;
  /** Failed bearer credentials at the data API, /mcp and userinfo: per client address. */
  failedCredentials: FailedCredentials;
  /** POST /oauth/introspect, around the engine: failed client authentication, per client address, as failed credentials. */
  introspection: Middleware;
  /** The sign-in form and the password change: per address and per account (or known device), with locks. */
  signIns: SignIns;
  /** A form posted to the authorization or logout endpoint, kept for the GET that follows: per client address. */
  postedForms: Middleware;
}

/**
 * Failed credentials per client address. Only failures are counted, and only a failure is ever
 * refused: a request is verified as before, and a credential that verifies is served whatever the
 * count, so no flood from an address (or from its IPv6 network) locks out a valid caller there.
 * Refusing every request from an address past the limit, valid or not, would save little (a bad
 * API key fails its checksum or one indexed lookup, a bad token its signature check) and would
 * let anyone who shares the address (a NAT, an IPv6 /64) cut off the valid callers there.
 * Past the limit a failure is answered 429 with Retry-After but keeps its own error code and
 * challenge: a client whose token merely expired is still told to get a new one, not to wait.
 */
export interface FailedCredentials {
  /**
   * A presented credential did not verify and the request is to be refused with `refusal`: counts
   * the failure against the client address, and answers what to throw, `refusal` itself or, past
   * the limit, the same refusal as 429 with Retry-After.
   */
  refused(ctx: Context, refusal: HttpError): Promise<HttpError>;
}

/** What the limits need to know of a request that only the layers above can read. */
export interface RequestKeys {
  /** The client_id a token request names, before the engine reads the body. */
  tokenClientId(ctx: Context): Promise<string | undefined>;
  /** The credential a data API request was authenticated with (one count per credential). */
  dataApiCredential(ctx: Context): string | undefined;
}

/** The key a request's client address is counted under. */
type AddressOf = (ctx: Context) => string;

const passThrough: Middleware = (_ctx, next) => next();
const countNoFailures: FailedCredentials = { refused: async (_ctx, refusal) => refusal };

/**
 * With `limits` undefined (RATE_LIMITS=off) nothing is limited; failed sign-ins are still logged.
 * `knownDevices` are the browsers the sign-in locks tell apart from others (known_devices.ts).
 */
export function createRateLimits(limits: RateLimits | undefined, counters: Counters, logger: Logger, keys: RequestKeys, knownDevices: KnownDevices): RateLimiting {
  const signIns = new SignIns(limits, counters, logger, knownDevices);
  if (!limits) {
    return {
      registration: passThrough, token: passThrough, pushedAuthorization: passThrough, dataApi: passThrough,
      failedCredentials: countNoFailures, introspection: passThrough, signIns, postedForms: passThrough,
    };
  }
  const counter = (name: string, rate: Rate) => counters.counter({ name, ...rate });
  const addressOf: AddressOf = (ctx) => addressKey(ctx.ip, limits.ipv6Prefix);
  const failedCredentials = failedCredentialLimit(counter('failed-credential-address', limits.failedCredentialsPerAddress), addressOf);
  return {
    registration: registrationLimit(counter('registration-address', limits.registration), addressOf),
    token: tokenLimit(counter('token-client', limits.tokenPerClient), counter('token-address', limits.tokenPerAddress), keys.tokenClientId, addressOf, TOKENS),
    pushedAuthorization: tokenLimit(
      counter('par-client', limits.tokenPerClient), counter('par-address', limits.tokenPerAddress), keys.tokenClientId, addressOf, PUSHED_REQUESTS,
    ),
    dataApi: dataApiLimit(counter('data-api-credential', limits.dataApi), keys.dataApiCredential),
    failedCredentials,
    introspection: introspectionLimit(failedCredentials),
    signIns,
    postedForms: postedFormLimit(counter('posted-form-address', limits.interactionsPerAddress), addressOf),
  };
}

/** Why an engine step refuses a request itself, where the host cannot answer for it. */
export interface Refusal {
  /** Seconds (Retry-After). */
  retryAfter: number;
  /** For the developer: the error_description. */
  description: string;
  /** For the person who sees it on a page: what happened, in their words (the wait is added). */
  inWordsOfThePerson: string;
}

/**
 * Asked just before the engine stores a new interaction for an authorization request (the sign-in
 * or consent page it redirects to): counts one for the client address, and answers a refusal past
 * the limit. Each interaction is a record kept for the interaction's lifetime whoever asked, so
 * anonymous requests from one address are limited by what they would store, counted where it is
 * stored: requests that need no page (a signed-in user's whose application already has consent,
 * `prompt=none`) count nothing and are never refused. Undefined with RATE_LIMITS=off.
 */
export type NewInteractionLimit = (ctx: Context) => Promise<Refusal | undefined>;

/** Made apart from the others: the engine's configuration takes it, and the others are made after the engine. */
export function createNewInteractionLimit(limits: RateLimits | undefined, counters: Counters): NewInteractionLimit | undefined {
  if (!limits) return undefined;
  return refusalsPerAddress(counters.counter({ name: 'interaction-address', ...limits.interactionsPerAddress }), limits.ipv6Prefix, {
    counted: 'sign-in pages opened',
    toThePerson: 'Too many sign-in pages were opened from your network in a short time.',
  });
}

/**
 * Asked by the engine just before it fetches a client's metadata document it holds no copy of
 * (a client_id that is an https URL, at any endpoint that names a client): counts one for the
 * client address, as a registration does, and answers a refusal past the limit. Each new document
 * is a fetch the server makes on the requester's say-so and a record it keeps, so a flood of
 * made-up client_id URLs is limited like a flood of registrations; a document already held counts
 * nothing. Undefined with RATE_LIMITS=off.
 */
export type NewMetadataDocumentLimit = (ctx: Context) => Promise<Refusal | undefined>;

/** Made apart from the others, as the interactions' limit: the engine's configuration takes it. */
export function createNewMetadataDocumentLimit(limits: RateLimits | undefined, counters: Counters): NewMetadataDocumentLimit | undefined {
  if (!limits) return undefined;
  return refusalsPerAddress(counters.counter({ name: 'metadata-document-address', ...limits.registration }), limits.ipv6Prefix, {
    counted: 'new applications',
    toThePerson: 'Too many applications this server did not know yet were tried from your network in a short time.',
  });
}

/** A per-address limit an engine step asks: one counted for the request's address, and past the limit the refusal, in the developer's words and the person's. */
function refusalsPerAddress(perAddress: Counter, ipv6Prefix: number, words: { counted: string; toThePerson: string }): (ctx: Context) => Promise<Refusal | undefined> {
  return async (ctx) => {
    const wait = await perAddress.take(addressKey(ctx.ip, ipv6Prefix));
    if (wait === undefined) return undefined;
    return {
      retryAfter: wait,
      description: `too many ${words.counted} from this address (${describe(perAddress)}); retry after ${inWords(wait)}`,
      inWordsOfThePerson: words.toThePerson,
    };
  };
}

/**
 * Each form posted to the authorization or logout endpoint is a record kept for the GET that
 * follows, whoever posted it: counted per address at the rate of the sign-in pages it leads to,
 * apart from them. A browser sent it, so the refusal is the error page, in the person's words.
 */
function postedFormLimit(perAddress: Counter, addressOf: AddressOf): Middleware {
  return async (ctx, next) => {
    const wait = await perAddress.take(addressOf(ctx));
    if (wait !== undefined) {
      throw new HttpError(429, 'temporarily_unavailable', `Too many sign-in and sign-out requests came from your network in a short time; try again in ${inWords(wait)}.`, { 'Retry-After': String(wait) });
    }
    await next();
  };
}

function registrationLimit(perAddress: Counter, addressOf: AddressOf): Middleware {
  return async (ctx, next) => {
    const wait = await perAddress.take(addressOf(ctx));
    if (wait !== undefined) throw oauthRefusal(ctx, wait, `too many client registrations from this address (${describe(perAddress)})`);
    await next();
  };
}

/** What a limit of the token endpoint's kind counts, in its refusals' words. */
interface CountedWords {
  /** Per client: "too many <perClient>". */
  perClient: string;
  /** Per address: "too many <perAddress> from this address". */
  perAddress: string;
}
const TOKENS: CountedWords = { perClient: 'tokens issued to this client', perAddress: 'token requests' };
const PUSHED_REQUESTS: CountedWords = { perClient: 'authorization requests pushed by this client', perAddress: 'pushed authorization requests' };

/**
 * Per address every request counts. Per client only the tokens it was issued (or the requests it
 * pushed) count: a request that names a client without its secret (or with a grant that is not
 * valid) is answered by the engine and uses up none of that client's allowance, so no one can lock
 * a client out by knowing its (public) client_id. Concurrent requests may pass a client's limit by
 * as many as are in flight: the count is taken once the answer is known.
 */
function tokenLimit(perClient: Counter, perAddress: Counter, clientIdOf: RequestKeys['tokenClientId'], addressOf: AddressOf, words: CountedWords): Middleware {
  return async (ctx, next) => {
    const clientId = await clientIdOf(ctx);
    const [addressWait, clientWait] = await Promise.all([
      perAddress.take(addressOf(ctx)),
      clientId === undefined ? undefined : perClient.waitIfSpent(clientId),
    ]);
    // Of two refusals, the longer wait is the one to tell.
    if (clientWait !== undefined && (addressWait === undefined || clientWait >= addressWait)) {
      throw oauthRefusal(ctx, clientWait, `too many ${words.perClient} (${describe(perClient)})`);
    }
    if (addressWait !== undefined) throw oauthRefusal(ctx, addressWait, `too many ${words.perAddress} from this address (${describe(perAddress)})`);
    await next();
    if (clientId !== undefined && ctx.status >= 200 && ctx.status < 300) await perClient.add(clientId);
  };
}

function dataApiLimit(perCredential: Counter, credentialOf: RequestKeys['dataApiCredential']): Middleware {
  return async (ctx, next) => {
    const credential = credentialOf(ctx);
    const wait = credential === undefined ? undefined : await perCredential.take(credential);
    if (wait === undefined) return next();
    throw new HttpError(429, 'too_many_requests', `too many requests with this credential (${describe(perCredential)}); retry after ${inWords(wait)}`, {
      'Retry-After': String(wait),
    });
  };
}

function failedCredentialLimit(perAddress: Counter, addressOf: AddressOf): FailedCredentials {
  return {
    async refused(ctx, refusal) {
      const wait = await perAddress.take(addressOf(ctx));
      if (wait === undefined) return refusal;
      return new HttpError(429, refusal.code, `${refusal.description}; too many failed credentials from this address (${describe(perAddress)}); retry after ${inWords(wait)}`, {
        ...refusal.headers,
        'Retry-After': String(wait),
      });
    },
  };
}

/**
 * Introspection authenticates its caller, a client, in the engine: a failed authentication
 * (401 invalid_client, whatever the method) counts as a failed credential, and past the limit is
 * answered 429 in the same RFC 6749 error. A client that authenticates is answered by the engine.
 */
function introspectionLimit(failedCredentials: FailedCredentials): Middleware {
  return async (ctx, next) => {
    await next();
    const body = ctx.body as { error?: unknown; error_description?: unknown } | undefined;
    if (ctx.status !== 401 || body?.error !== 'invalid_client') return;
    const description = typeof body.error_description === 'string' ? body.error_description : 'client authentication failed';
    const authenticate = ctx.response.get('WWW-Authenticate');
    const refusal = new HttpError(401, 'invalid_client', description, authenticate ? { 'WWW-Authenticate': authenticate } : {});
    const answer = await failedCredentials.refused(ctx, refusal);
    if (answer !== refusal) throw answer;
  };
}

/**
 * RFC 6749 defines no error for 429. `temporarily_unavailable` is its registered code for "cannot
 * handle the request now, try later" (4.1.2.1: temporary overloading), which stock clients treat
 * as retryable; the 429 status and Retry-After say it is this caller's rate. `slow_down`
 * (RFC 8628) belongs to device-flow polling, and a code of our own would be known to no client.
 */
function oauthRefusal(ctx: Context, wait: number, description: string): HttpError {
  const headers: Record<string, string> = { 'Retry-After': String(wait) };
  // A browser client reads the refusal, and its Retry-After, which the host's error mapping
  // exposes (the token endpoint's own CORS comes from the engine, which is not reached); nothing
  // in it is for one origin only, and no cookie goes to these endpoints.
  if (ctx.get('Origin') && !ctx.response.get('Access-Control-Allow-Origin')) headers['Access-Control-Allow-Origin'] = '*';
  return new HttpError(429, 'temporarily_unavailable', `${description}; retry after ${inWords(wait)}`, headers);
}

function describe({ rule }: Counter): string {
  return `at most ${rule.points} in ${inWords(rule.duration)}`;
}
