import type { ModelStore } from '../../adapters/store.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { nowSeconds, systemClock, type Clock } from '../shared/clock.ts';
import { digest } from '../shared/digest.ts';
import { SafeFetchError, type SafeFetch } from '../shared/safe_fetch.ts';
import { isNativeRedirectSet } from './native_apps.ts';

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document): a client whose
 * `client_id` is an https URL describes itself in the JSON document at that URL. The engine
 * (oidc-provider's `features.clientIdMetadataDocument`) validates the document and builds the
 * client from it; this supplies what it lacks: the fetch, through the one SSRF-safe fetcher,
 * and a cache every instance shares through the store. The same fetch and cache serve the key
 * sets (`jwks_uri`) of `private_key_jwt` clients.
 *
 * - A document is kept for its `Cache-Control: max-age`, within MetadataDocument.minSeconds and
 *   maxSeconds; kept past that until maxSeconds, it is served while a fetch to renew it fails.
 * - A failed fetch is remembered for failureSeconds: a client_id that does not answer is not
 *   fetched again at every request. So is one that answers something no document or key set can
 *   be (not a JSON object, another client_id): only those are kept, so made-up URLs answering junk
 *   do not fill the store.
 * - Concurrent requests for one new client_id make one fetch on each instance: the engine
 *   coalesces them before it calls `fetch`.
 * - A document that names no `application_type` is read as a native app's when every redirect URI
 *   is loopback http or a private-use scheme (RFC 8252): real clients omit it, and the engine
 *   would otherwise take it for a web client's, whose loopback port must match exactly.
 * - A document that names no `token_endpoint_auth_method` is a public client's (`none`): the MCP
 *   specification asks only for client_id, client_name and redirect_uris, and the engine's default
 *   for registrations (client_secret_post) would ask it for a secret no document may hold.
 */

/**
 * Whether a client_id names a metadata document (an https URL), as opposed to a registered
 * client's id. The engine's own test, whose scheme match ignores case: every rule this service
 * adds for document clients must reach every client_id the engine would fetch a document for.
 */
export function isMetadataDocumentUrl(clientId: unknown): clientId is string {
  return typeof clientId === 'string' && /^https:\/\//i.test(clientId);
}

/**
 * Whether a client_id URL is written the one way the URL standard writes it: a lower-case scheme
 * and host, a path (the draft requires one; `https://host` has none), no default port. Otherwise
 * one document would be several clients, each with its own consent, and `HTTPS://host/x` and
 * `https://host/x` could be told apart by one check and not by another.
 */
function isCanonicalUrl(clientId: string): boolean {
  const url = URL.parse(clientId);
  return url?.href === clientId;
}

/** The host a document's client is known by on the pages: who the application is. */
export function documentHost(clientId: string): string {
  return URL.parse(clientId)?.host ?? clientId;
}

const { minSeconds, maxSeconds, failureSeconds } = LIFETIMES.MetadataDocument;

/** A document's server answered, but not with a document (a status other than 200), or did not answer a moment ago. */
class DocumentNotServed extends Error {
  override name = 'DocumentNotServed';
}

/** The engine's description of a document it could not fetch or read, whatever the reason (which it keeps to itself). */
const ENGINE_FETCH_FAILED = 'client_id metadata document fetch failed';

/**
 * Why the engine could not fetch or read a client_id's metadata document, in words whoever sent
 * the client_id may read (they chose the URL): undefined for any other refusal. The engine says
 * only that the fetch failed; without the reason, a client's developer cannot tell a typo in the
 * URL from a document that is not JSON.
 */
export function whyDocumentNotFetched(refusal: unknown): string | undefined {
  const { error_description: description, cause } = (refusal ?? {}) as { error_description?: unknown; cause?: unknown };
  if (description !== ENGINE_FETCH_FAILED) return undefined;
  // JSON.parse's message quotes the body it failed on: the document is named, not quoted.
  return cause instanceof SyntaxError ? 'the document is not JSON' : toldReason(cause);
}

/** Why a fetch failed, in words whoever chose the URL may read; undefined for a failure of no known kind. */
function toldReason(error: unknown): string | undefined {
  if (error instanceof SafeFetchError) return error.told;
  if (error instanceof DocumentNotServed) return error.message;
  return undefined;
}

/** What the store keeps of a document: its text and when it was fetched, or when a fetch last failed. */
interface StoredDocument {
  url: string;
  body?: string;
  fetchedAt?: number;
  /** Seconds it may be used without asking again (max-age within the bounds). */
  maxAge?: number;
  failedAt?: number;
  /** Why the fetch at failedAt failed, in words whoever names the client_id may read (whyDocumentNotFetched). */
  failure?: string;
  /** When this record's history began: the fetch that found no copy before it. */
  firstFetchedAt?: number;
  /** When each redirect URI a later fetch found, and the copy before did not list, was first seen. */
  redirectUrisAddedAt?: Record<string, number>;
}

/**
 * What the store knows of when a document's redirect URIs appeared: `since`, the fetch its copies
 * go back to without a break, at which every URI not in `addedAt` was already listed; `addedAt`,
 * when each URI a later version added was first seen. What this cannot tell (the copy was dropped:
 * unused past the upper bound, or a failure replaced it) starts again at the next fetch, so a
 * gap in what is known never counts a URI as older than it may be.
 */
export interface RedirectUriHistory {
  since: number;
  addedAt: Readonly<Record<string, number>>;
}

export class MetadataDocuments {
  static readonly MODEL = 'ClientMetadataDocument';
  readonly #documents: ModelStore;
  readonly #fetch: SafeFetch;
  /** CIMD_ALLOWED_DOMAINS: the domains whose URLs may act as clients; undefined: any. */
  readonly #allowedDomains: readonly string[] | undefined;
  readonly #clock: Clock;

  constructor(documents: ModelStore, fetch: SafeFetch, options: { allowedDomains?: readonly string[] | undefined; clock?: Clock } = {}) {
    this.#documents = documents;
    this.#fetch = fetch;
    this.#allowedDomains = options.allowedDomains;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * Whether a client_id URL may act as a client (the engine's `allowFetch`): any written the one
   * way a URL is written, unless the operator named the domains that may (CIMD_ALLOWED_DOMAINS):
   * then its host must be one of them or below one.
   */
  mayFetch(clientId: string): boolean {
    if (!isCanonicalUrl(clientId)) return false;
    if (!this.#allowedDomains) return true;
    const host = URL.parse(clientId)?.hostname.toLowerCase();
    return host !== undefined && this.#allowedDomains.some((domain) => host === domain || host.endsWith(`.${domain}`));
  }

  /**
   * Whether a request naming this client_id would make the server fetch a document: a URL it may
   * fetch, with no copy in the store that may still be served (what counts against the limit on
   * new documents).
   */
  async wouldFetch(clientId: unknown): Promise<boolean> {
    if (!isMetadataDocumentUrl(clientId) || !this.mayFetch(clientId)) return false;
    const stored = await this.#stored(clientId);
    const servable = stored?.body !== undefined && stored.fetchedAt !== undefined && nowSeconds(this.#clock) < stored.fetchedAt + maxSeconds;
    return !servable;
  }

  /**
   * The engine's `fetch`, for metadata documents and the key sets of clients registered with a
   * `jwks_uri`: the stored copy while it is fresh, else a fetch, the stale copy if that fails.
   * Answers as the document's server would, its max-age what is left of the copy's.
   */
  readonly fetch = (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    return this.#resolve(url, init);
  };

  async #resolve(url: string, init: { headers?: HeadersInit }): Promise<Response> {
    const now = nowSeconds(this.#clock);
    const stored = await this.#stored(url);
    if (stored?.body !== undefined && stored.fetchedAt !== undefined && now < stored.fetchedAt + (stored.maxAge ?? minSeconds)) {
      return documentResponse(url, stored.body, stored.fetchedAt + (stored.maxAge ?? minSeconds) - now);
    }
    if (stored?.failedAt !== undefined && now < stored.failedAt + failureSeconds && stored.body === undefined) {
      throw new DocumentNotServed(`${stored.failure ?? `${documentHost(url)} could not be fetched`} (when last asked, less than ${failureSeconds} s ago)`);
    }
    let withdrawn = false;
    try {
      const response = await this.#fetch(url, { headers: { accept: 'application/json', ...headersOf(init.headers) } });
      if (response.status !== 200) {
        withdrawn = isWithdrawal(response.status);
        throw new DocumentNotServed(`${documentHost(url)} answered ${response.status}`);
      }
      const body = await response.text();
      const failure = whyNotWorthKeeping(url, body);
      if (failure) {
        // The engine says what is wrong with it; the store keeps only that the fetch failed, so
        // made-up URLs answering junk cost the store nothing but a short-lived mark.
        await this.#documents.upsert(digest(url), { url, failedAt: now, failure } satisfies StoredDocument, failureSeconds);
        return documentResponse(url, body, 0);
      }
      const maxAge = cacheSeconds(response.headers.get('cache-control'));
      const history = nextRedirectUriHistory(stored, body, now);
      await this.#documents.upsert(digest(url), {
        url, body, fetchedAt: now, maxAge, firstFetchedAt: history.since, redirectUrisAddedAt: history.addedAt,
      } satisfies StoredDocument, maxSeconds);
      return documentResponse(url, body, maxAge);
    } catch (error) {
      // A copy that has not outlived the upper bound is served while its server does not answer,
      // never against the server's own word that the document is gone (RFC 9111 section 4.2.4):
      // taking the document down is how its publisher ends the client.
      if (!withdrawn && stored?.body !== undefined && stored.fetchedAt !== undefined && now < stored.fetchedAt + maxSeconds) {
        return documentResponse(url, stored.body, minSeconds);
      }
      const failure = toldReason(error);
      await this.#documents.upsert(digest(url), { url, failedAt: now, failure } satisfies StoredDocument, failureSeconds).catch(() => undefined);
      throw error;
    }
  }

  /**
   * When the document's redirect URIs appeared, for the rule that consent reaches only the
   * redirect URIs a client had when the user gave it (src/engine/redirect_uri_consent.ts): a
   * document's publisher can add one at any time. Undefined when the store holds no copy.
   */
  async redirectUriHistory(clientId: string): Promise<RedirectUriHistory | undefined> {
    const stored = await this.#stored(clientId);
    if (stored?.body === undefined || stored.fetchedAt === undefined) return undefined;
    // A copy kept before its history was: known from its last fetch only.
    return { since: stored.firstFetchedAt ?? stored.fetchedAt, addedAt: stored.redirectUrisAddedAt ?? {} };
  }

  async #stored(url: string): Promise<StoredDocument | undefined> {
    const stored = await this.#documents.find(digest(url));
    return stored?.url === url ? stored as unknown as StoredDocument : undefined;
  }
}

/**
 * The history of a document's redirect URIs once `body` was fetched at `now`: carried on from the
 * copy before it, the URIs it did not list added now (one dropped and listed again is added again);
 * begun anew when there was no copy to carry it on from.
 */
function nextRedirectUriHistory(stored: StoredDocument | undefined, body: string, now: number): RedirectUriHistory {
  const listed = redirectUrisOf(body);
  // A copy past the upper bound is one the store is about to drop: as good as none.
  if (stored?.body === undefined || stored.fetchedAt === undefined || now >= stored.fetchedAt + maxSeconds) return { since: now, addedAt: {} };
  const before = new Set(redirectUrisOf(stored.body));
  const known = stored.redirectUrisAddedAt ?? {};
  const addedAt: Record<string, number> = {};
  for (const uri of listed) {
    if (!before.has(uri)) addedAt[uri] = now;
    else if (known[uri] !== undefined) addedAt[uri] = known[uri];
  }
  return { since: stored.firstFetchedAt ?? stored.fetchedAt, addedAt };
}

function redirectUrisOf(body: string): string[] {
  const uris = jsonObject(body)?.redirect_uris;
  return Array.isArray(uris) ? uris.filter((uri): uri is string => typeof uri === 'string') : [];
}

/**
 * Whether a status other than 200 is the document's server saying it is not there (a 404, a 410,
 * a redirect, which is not followed), rather than failing for now (a 5xx, 408, 429).
 */
function isWithdrawal(status: number): boolean {
  return status < 500 && status !== 408 && status !== 429;
}

/**
 * Why a fetched body cannot be what it was fetched as, in words whoever named the URL may read;
 * undefined when it can: a client's metadata document (a JSON object whose client_id is its URL)
 * or a key set (a JSON object with `keys`). Anything else the engine refuses at once; keeping it
 * would let anyone fill the store by naming URLs that answer junk.
 */
function whyNotWorthKeeping(url: string, body: string): string | undefined {
  const fields = jsonObject(body);
  if (fields === undefined) return 'the document is not JSON';
  return fields.client_id === url || Array.isArray(fields.keys) ? undefined : 'the document names another client_id';
}

/** The body as a JSON object; undefined when it is not one. */
function jsonObject(body: string): Record<string, unknown> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed as Record<string, unknown> : undefined;
}

/** `max-age` within the bounds; the lower bound when the document's server says nothing. */
function cacheSeconds(cacheControl: string | null): number {
  const maxAge = cacheControl ? /(?:^|,)\s*max-age\s*=\s*(\d+)/i.exec(cacheControl)?.[1] : undefined;
  const seconds = maxAge === undefined ? minSeconds : Number(maxAge);
  return Math.max(minSeconds, Math.min(maxSeconds, seconds));
}

function documentResponse(url: string, body: string, maxAge: number): Response {
  return new Response(asServerReadsIt(url, body), { status: 200, headers: { 'content-type': 'application/json', 'cache-control': `max-age=${Math.max(0, Math.round(maxAge))}` } });
}

/** At most what asServerReadsIt adds to a document: `,"token_endpoint_auth_method":"none","application_type":"native"`. */
export const DOCUMENT_DEFAULTS_BYTES = 128;

/**
 * A metadata document (its `client_id` is its URL) with what it leaves out said on its behalf:
 * `token_endpoint_auth_method` `none`, and `application_type` `native` when its redirect URIs are a
 * native app's. Anything else, a client's key set among them, as it is.
 */
function asServerReadsIt(url: string, body: string): string {
  const fields = jsonObject(body);
  if (fields?.client_id !== url) return body;
  const native = fields.application_type === undefined && isNativeRedirectSet(fields.redirect_uris);
  if (!native && fields.token_endpoint_auth_method !== undefined) return body;
  return JSON.stringify({
    ...fields,
    ...(native ? { application_type: 'native' } : {}),
    ...(fields.token_endpoint_auth_method === undefined ? { token_endpoint_auth_method: 'none' } : {}),
  });
}

function headersOf(headers: HeadersInit | undefined): Record<string, string> {
  return Object.fromEntries(new Headers(headers ?? {}).entries());
}
