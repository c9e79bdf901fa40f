import type { ModelStore } from '../../adapters/store.ts';
import { LOOPBACK_HOSTS } from '../../config/parsers.ts';
import { boundedCache, type BoundedCache } from '../shared/bounded_cache.ts';
import { nowSeconds, systemClock, type Clock } from '../shared/clock.ts';
import { digest } from '../shared/digest.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';

/**
 * The APIs this server issues access tokens for (RFC 8707 resource indicators): those it serves
 * itself (the data API, `/mcp`) and those an operator registered (`admin resource-server create
 * --resource URI`), an MCP server or any other API that trusts this issuer. A token names its API
 * in `aud` and carries only the scopes that API accepts; an API nobody registered gets no token.
 *
 * A registered API accepts scopes of the service's own (RESOURCE_SCOPES): what a user allows on the
 * consent page means the same thing whichever API the application reaches with it.
 */
export interface ProtectedResource {
  /** The canonical URI: what a client names as `resource`, and the tokens' `aud`. */
  resource: string;
  /** What the consent page and the admin CLI call it. */
  name: string;
  /** The scopes it accepts. */
  scopes: readonly string[];
  /** Served by this service; an operator registered the others. */
  builtIn: boolean;
  /** Its tokens are DPoP-bound only (RFC 9449): the token endpoint issues none without a proof, and the API refuses plain bearer tokens. */
  dpopRequired: boolean;
  /** Seconds since the epoch; registered ones only. */
  createdAt?: number;
}

/** The scopes a registered API may accept. */
export const RESOURCE_SCOPES: readonly string[] = ['api', 'profile'];

/** A registration the operator must change: the message says what. */
export class ResourceError extends Error {
  override name = 'ResourceError';
}

const MODEL = 'ResourceServer';
const NAME_MAX = 100;
const CACHED = 1_000;

/**
 * The store's registered APIs behind an in-process cache: a resource is looked up on every
 * authorization and token request that names one, and served from memory for
 * PROPAGATION_BOUND_MS after it was read (the longest a deletion made elsewhere goes unseen
 * here). An unknown resource is never cached: one registered through another instance is found at once.
 */
export class ProtectedResources {
  static readonly MODEL = MODEL;
  readonly #models: ModelStore;
  readonly #builtIn: ReadonlyMap<string, ProtectedResource>;
  readonly #clock: Clock;
  readonly #registered: BoundedCache<string, ProtectedResource>;
  readonly #builtInDpopOnly: boolean;
  /** Whether a registered API takes DPoP-bound tokens only, read at most every PROPAGATION_BOUND_MS. */
  readonly #registeredDpopOnly: BoundedCache<'any', boolean>;

  constructor(models: ModelStore, builtIn: readonly ProtectedResource[], clock: Clock = systemClock) {
    this.#models = models;
    this.#builtIn = new Map(builtIn.map((resource) => [resource.resource, resource]));
    this.#builtInDpopOnly = builtIn.some((api) => api.dpopRequired);
    this.#clock = clock;
    this.#registered = boundedCache({ max: CACHED, ttlMs: PROPAGATION_BOUND_MS, clock });
    this.#registeredDpopOnly = boundedCache({ max: 1, ttlMs: PROPAGATION_BOUND_MS, clock });
  }

  /**
   * Whether any API takes DPoP-bound tokens only (RFC 9449), so that a token request without a
   * proof may be one to refuse. One registered elsewhere is seen within PROPAGATION_BOUND_MS, or as
   * soon as a request here names it (an authorization request does before any token request).
   */
  async someRequireDpop(): Promise<boolean> {
    if (this.#builtInDpopOnly) return true;
    const cached = this.#registeredDpopOnly.get('any');
    if (cached !== undefined) return cached;
    const registered = (await this.#models.list()).some(({ payload }) => fromPayload(payload)?.dpopRequired === true);
    this.#registeredDpopOnly.set('any', registered);
    return registered;
  }

  /**
   * The API a `resource` names, or undefined for one this server issues no tokens for. A spelling
   * with an upper-case scheme or host (the MCP authorization specification asks servers to accept
   * one), the scheme's default port or an empty path names the same API; the rest of the URI is
   * compared exactly.
   */
  async find(resource: string): Promise<ProtectedResource | undefined> {
    const found = await this.#findExactly(resource);
    if (found) return found;
    const canonical = canonicalSpelling(resource);
    return canonical === resource ? undefined : this.#findExactly(canonical);
  }

  async #findExactly(resource: string): Promise<ProtectedResource | undefined> {
    const builtIn = this.#builtIn.get(resource);
    if (builtIn) return builtIn;
    const cached = this.#registered.get(resource);
    if (cached) return cached;
    const found = fromPayload(await this.#models.find(storeId(resource)));
    if (found?.resource !== resource) return undefined;
    this.#registered.set(resource, found);
    if (found.dpopRequired) this.#registeredDpopOnly.set('any', true);
    return found;
  }

  /** Every API: those served here, then those an operator registered, oldest first. */
  async all(): Promise<ProtectedResource[]> {
    const registered = (await this.#models.list()).map(({ payload }) => fromPayload(payload)).filter((found) => found !== undefined);
    return [...this.#builtIn.values(), ...registered];
  }

  /** Registers an API; refuses what is not a canonical URI, one already known, or scopes not of the service's own. */
  async register(request: { resource: string; name: string; scopes: readonly string[]; dpopRequired?: boolean }): Promise<ProtectedResource> {
    const resource = canonicalResource(request.resource);
    const name = request.name.trim();
    if (!name || name.length > NAME_MAX || /\p{Cc}/u.test(name)) throw new ResourceError(`the API needs a name of 1 to ${NAME_MAX} printable characters`);
    const scopes = [...new Set(request.scopes.length ? request.scopes : ['api'])];
    const foreign = scopes.filter((scope) => !RESOURCE_SCOPES.includes(scope));
    if (foreign.length) throw new ResourceError(`an API accepts the service's own scopes (${RESOURCE_SCOPES.join(', ')}), not ${foreign.join(', ')}`);
    if (await this.find(resource)) throw new ResourceError(`${resource} is already an API this server issues tokens for`);
    const dpopRequired = request.dpopRequired === true;
    const registered: ProtectedResource = { resource, name, scopes, builtIn: false, dpopRequired, createdAt: nowSeconds(this.#clock) };
    await this.#models.upsert(storeId(resource), { resource, name, scopes, dpopRequired, createdAt: registered.createdAt }, undefined);
    return registered;
  }

  /** Removes a registered API; undefined when there is none (a built-in one cannot be removed). */
  async remove(resource: string): Promise<ProtectedResource | undefined> {
    const found = await this.find(resource);
    if (!found || found.builtIn) return undefined;
    this.#registered.delete(found.resource);
    await this.#models.destroy(storeId(found.resource));
    return found;
  }
}

/**
 * A resource indicator as RFC 8707 section 2 wants it: an absolute URI without a fragment; https,
 * or http on loopback (development); without userinfo. Returned with its scheme and host in lower
 * case, the canonical form; the rest as given (it is compared exactly).
 */
export function canonicalResource(value: string): string {
  const url = URL.parse(value);
  if (!url || !/^https?:\/\//i.test(value)) throw new ResourceError(`the resource must be an absolute https URI, got '${value}'`);
  if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) throw new ResourceError(`the resource must use https (http only on loopback), got '${value}'`);
  if (value.includes('#')) throw new ResourceError('the resource must not have a fragment (RFC 8707 section 2)');
  if (url.username || url.password) throw new ResourceError('the resource must not contain a user name or password');
  return canonicalSpelling(value);
}

/**
 * The URI in the form `new URL()` writes its scheme and authority, which is how clients and
 * resource servers spell an identifier: both in lower case (case-insensitive, RFC 3986 section
 * 6.2.2.1), without the scheme's default port, and with an empty path as `/` (both equivalent to
 * the other spelling, section 6.2.3). The rest of the URI is kept as given.
 */
function canonicalSpelling(uri: string): string {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(uri)?.[0];
  if (!authority) return uri;
  const canonical = authority.toLowerCase().replace(/^(https:\/\/.*):443$|^(http:\/\/.*):80$/, (_, https?: string, http?: string) => https ?? http ?? '');
  const rest = uri.slice(authority.length);
  return canonical + (rest === '' || rest.startsWith('?') ? `/${rest}` : rest);
}

/** Fixed-length store ids, whatever the URI. */
function storeId(resource: string): string {
  return digest(resource);
}

function fromPayload(payload: Record<string, unknown> | undefined): ProtectedResource | undefined {
  if (!payload || typeof payload.resource !== 'string' || typeof payload.name !== 'string' || !Array.isArray(payload.scopes)) return undefined;
  return {
    resource: payload.resource,
    name: payload.name,
    scopes: payload.scopes.filter((scope): scope is string => typeof scope === 'string'),
    builtIn: false,
    dpopRequired: payload.dpopRequired === true,
    ...(typeof payload.createdAt === 'number' ? { createdAt: payload.createdAt } : {}),
  };
}
