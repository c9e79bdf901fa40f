import cluster from 'node:cluster';

import { collectDefaultMetrics, Counter, Registry } from 'prom-client';

import { scrapeThroughPrimary } from './cluster.ts';
import { FixedSeriesHistogram } from './fixed_series_histogram.ts';

/** Seconds. The token endpoint answers in milliseconds; the buckets reach down to 1 ms. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds. A store operation takes tens to hundreds of microseconds when all is well. */
const STORE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

/** Methods a label may name; anything else a client sends is `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** An OAuth error code as labels take it: RFC 6749 codes are short lower-case words. */
const CODE = /^[a-z_]{1,40}$/;
/** The grant types the token endpoint issues tokens for. */
const GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials'] as const;
const STORE_ERRORS = new Set(['BackendUnavailableError', 'DuplicateError', 'LastAdminError']);

/** One store operation's timer and error count, made once when the store is wrapped (store.ts). */
export interface StoreOperationMetrics {
  /** `ms`: milliseconds, from performance.now(). */
  observe(ms: number): void;
  failed(error: unknown): void;
}

/**
 * The service's Prometheus metrics, one registry a process, made once at start (a key rotation
 * rebuilds the service, never these). Every label value is bounded: routes are templates
 * (routes.ts: from the route that answered), codes and grant types are checked, ids never appear.
 * Children of a label set are made once and kept: prom-client checks and hashes labels on every
 * `labels()` call. The two histograms, observed at every request and every store operation, keep
 * their counts in plain arrays (fixed_series_histogram.ts): prom-client's Histogram hashes the
 * labels at every observation, a child's too.
 */
export class Metrics {
  /** The exposition text: this process's, or with WORKERS above 1 every worker's summed up through the primary. */
  readonly scrape: () => Promise<string>;
  readonly #requests: Counter<'route' | 'method' | 'status'>;
  readonly #duration: FixedSeriesHistogram;
  readonly #tokens: Counter<'grant_type'>;
  readonly #oauthErrors: Counter<'route' | 'error'>;
  readonly #loginFailures: Counter<'reason'>;
  readonly #rateLimited: Counter<'route'>;
  readonly #storeDuration: FixedSeriesHistogram;
  readonly #storeErrors: Counter<'facet' | 'operation' | 'error'>;
  readonly #requestChildren = new Map<string, { count: Counter.Internal; duration: (seconds: number) => void }>();
  readonly #tokenChildren = new Map<string, Counter.Internal>();

  /** In a cluster worker this also starts answering the primary's requests for this worker's metrics (cluster.ts). */
  constructor() {
    const registry = new Registry();
    const registers = [registry];
    this.scrape = cluster.isWorker ? scrapeThroughPrimary(registry) : () => registry.metrics();
    collectDefaultMetrics({ register: registry });
    this.#requests = new Counter({ name: 'http_requests_total', help: 'HTTP requests answered, by route template, method and status', labelNames: ['route', 'method', 'status'], registers });
    this.#duration = new FixedSeriesHistogram({
      name: 'http_request_duration_seconds', help: 'Time to answer an HTTP request, by route template and method', buckets: REQUEST_BUCKETS, registers,
    });
    this.#tokens = new Counter({ name: 'oauth_tokens_issued_total', help: 'Successful token endpoint answers, by grant type', labelNames: ['grant_type'], registers });
    this.#oauthErrors = new Counter({ name: 'oauth_errors_total', help: 'OAuth error answers of the /oauth/ endpoints, by route template and error code', labelNames: ['route', 'error'], registers });
    this.#loginFailures = new Counter({
      name: 'login_failures_total', help: 'Sign-in form submissions that did not sign in: wrong email or password, or refused by a rate limit',
      labelNames: ['reason'], registers,
    });
    this.#rateLimited = new Counter({ name: 'rate_limit_refusals_total', help: 'Requests refused by a rate limit (429), by route template', labelNames: ['route'], registers });
    this.#storeDuration = new FixedSeriesHistogram({
      name: 'store_operation_duration_seconds', help: 'Time a store operation took, by facet (engine model or accounts, settings, ...) and operation',
      buckets: STORE_BUCKETS, registers,
    });
    this.#storeErrors = new Counter({
      name: 'store_operation_errors_total', help: 'Store operations that failed, by facet, operation and error (BackendUnavailableError: the store did not answer)',
      labelNames: ['facet', 'operation', 'error'], registers,
    });
    // Series that exist from the start, so a rate over them is defined before the first event.
    for (const grantType of GRANT_TYPES) this.#tokens.labels(grantType).inc(0);
    for (const reason of ['invalid_credentials', 'rate_limited']) this.#loginFailures.labels(reason).inc(0);
  }

  request(route: string, method: string, status: number, seconds: number): void {
    const verb = METHODS.has(method) ? method : 'other';
    const key = `${route} ${verb} ${status}`;
    let children = this.#requestChildren.get(key);
    if (!children) {
      children = { count: this.#requests.labels(route, verb, String(status)), duration: this.#duration.series({ route, method: verb }) };
      this.#requestChildren.set(key, children);
    }
    children.count.inc();
    children.duration(seconds);
  }

  tokenIssued(grantType: unknown): void {
    // The label is this file's own string, never the request's: a value read from a form body is a
    // slice of the body, and a kept label would keep the body (its client secret and code) for good.
    const label = GRANT_TYPES.find((known) => known === grantType) ?? 'other';
    let child = this.#tokenChildren.get(label);
    if (!child) {
      child = this.#tokens.labels(label);
      this.#tokenChildren.set(label, child);
    }
    child.inc();
  }

  oauthError(route: string, code: string): void {
    this.#oauthErrors.labels(route, CODE.test(code) ? code : 'other').inc();
  }

  loginFailed(reason: 'invalid_credentials' | 'rate_limited'): void {
    this.#loginFailures.labels(reason).inc();
  }

  rateLimited(route: string): void {
    this.#rateLimited.labels(route).inc();
  }

  storeOperation(facet: string, operation: string): StoreOperationMetrics {
    const duration = this.#storeDuration.series({ facet, operation });
    const errors = this.#storeErrors;
    return {
      observe: (ms) => duration(ms / 1000),
      failed: (error) => {
        const name = error instanceof Error && STORE_ERRORS.has(error.name) ? error.name : 'other';
        errors.labels(facet, operation, name).inc();
      },
    };
  }
}
