import { hash } from 'node:crypto';

import type { RevocationEntry, RevocationStore } from '../../adapters/store.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';

/**
 * How a JWT access token is revoked without a write when it is issued.
 *
 * Access tokens are never stored. A revocation writes one entry to the store's revocation list,
 * every instance mirrors the live entries in process, and verification consults that mirror:
 * a few map lookups after the signature check, no store read. An entry names a grant (every
 * token of a revoked grant), a client (every token of a deleted client), an API (every token for
 * an API its operator removed) or one token (RFC 7009), and lives only as long as a token it can
 * match may still be alive.
 */

/** The longest an access token lives: a grant or client entry must outlast every token it can match. */
const MAX_ACCESS_TOKEN_SECONDS = Math.max(LIFETIMES.AccessToken, LIFETIMES.ClientCredentials);
/** Kept past a token's `exp` for instances and resource servers whose clocks run a little behind. */
export const CLOCK_MARGIN_SECONDS = 60;
/**
 * Single-token revocations kept per grant or per client. Past this, revoking one more of its tokens
 * revokes all its tokens issued until that one instead (one entry), so a client that revokes in a
 * loop cannot grow the list: it holds at most this many entries, plus one, per grant and per client.
 */
export const TOKEN_REVOCATIONS_PER_OWNER = 100;
/** How often an instance reads the entries other instances (and the admin CLI) added. */
export const REFRESH_INTERVAL_MS = 1000;
/**
 * A mirror not refreshed for this long (the timer was held up) is not trusted: verification reads
 * the store first, and fails (503) if it cannot, rather than accept a token that may be revoked.
 */
const STALE_AFTER_MS = PROPAGATION_BOUND_MS;
/** Expired entries are dropped from the mirror at most this often (reads already ignore them). */
const PRUNE_INTERVAL_MS = 10_000;

/** The claims of an access token that revocation can match. */
export interface RevocableToken {
  jti: string;
  iat: number;
  exp: number;
  client_id: string;
  /** The grant reference of a user's token; client-credentials tokens have no grant. */
  gid?: string;
  /** The API (or APIs) the token is for. */
  aud?: string | string[];
}

/**
 * The `gid` claim: a reference to the token's grant, so a revoked grant can be matched without a
 * store read. A digest of the engine's grant id, so the token never carries a storage key.
 */
export function grantReference(grantId: string): string {
  return hash('sha256', grantId, 'base64url').slice(0, 22);
}

const seconds = (ms: number) => Math.floor(ms / 1000);
const audiences = ({ aud }: RevocableToken): string[] => (aud === undefined ? [] : Array.isArray(aud) ? aud : [aud]);
/**
 * Whose token it is, for the flood bound: its grant, or for a client_credentials token (no grant)
 * the client's own tokens, apart from `client:` (every token of a deleted client, its users' too).
 */
const ownerOf = (token: RevocableToken) => (token.gid ? `grant:${token.gid}` : `client_credentials:${token.client_id}`);

/** What each kind of revocation writes, at time `now` (seconds); shared by the service and the admin CLI. */
export const revocationEntries = {
  /** Every token of the grant, whenever issued. */
  grant(grantId: string, now: number): RevocationEntry {
    return everything(`grant:${grantReference(grantId)}`, now);
  },
  /** Every token of a deleted client, including any an instance with a stale copy of the client issues. */
  deletedClient(clientId: string, now: number): RevocationEntry {
    return everything(`client:${clientId}`, now);
  },
  /**
   * Every token for an API its operator removed (src/clients/protected_resources.ts), up to when
   * every instance knows it is gone; not the tokens issued once it is registered again.
   */
  removedResource(resource: string, now: number): RevocationEntry {
    const issuedBefore = now + Math.ceil(PROPAGATION_BOUND_MS / 1000) + 1;
    return { key: `resource:${resource}`, issuedBefore, expiresAt: now + MAX_ACCESS_TOKEN_SECONDS + CLOCK_MARGIN_SECONDS };
  },
  /** One token (RFC 7009), until it expires. */
  token(token: RevocableToken): RevocationEntry {
    const expiresAt = token.exp + CLOCK_MARGIN_SECONDS;
    return { key: `token:${token.jti}`, owner: ownerOf(token), issuedBefore: expiresAt, expiresAt };
  },
  /**
   * The flood bound: every token of a grant or client issued up to `token`, within its second,
   * `token` included. Not up to now: a token issued since (the one a refresh just gave, before the
   * client revoked the one it replaced) is none the client asked to revoke.
   */
  issuedUntil(owner: string, token: RevocableToken, now: number): RevocationEntry {
    return { key: owner, issuedBefore: token.iat + 1, expiresAt: now + MAX_ACCESS_TOKEN_SECONDS + CLOCK_MARGIN_SECONDS };
  },
};

function everything(key: string, now: number): RevocationEntry {
  const expiresAt = now + MAX_ACCESS_TOKEN_SECONDS + CLOCK_MARGIN_SECONDS;
  return { key, issuedBefore: expiresAt, expiresAt };
}

/** The in-process mirror of the store's revocation list, and the one way the service revokes access tokens. */
export class RevocationList {
  readonly #store: RevocationStore;
  readonly #clock: () => number;
  readonly #entries = new Map<string, RevocationEntry>();
  /** Live `token:` entries per grant or client, for the flood bound. */
  readonly #perOwner = new Map<string, number>();
  #cursor = 0;
  #refreshedAt = Number.NEGATIVE_INFINITY;
  #prunedAt = 0;
  #refreshing: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(store: RevocationStore, clock: () => number = Date.now) {
    this.#store = store;
    this.#clock = clock;
  }

  /** Reads the whole list, then keeps reading what is added every REFRESH_INTERVAL_MS until `stop()`. */
  async start(): Promise<void> {
    await this.refresh();
    this.#timer = setInterval(() => this.refresh().catch(() => undefined), REFRESH_INTERVAL_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** Reads the entries added since the last read. One read at a time; callers arriving meanwhile share it. */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#read().finally(() => { this.#refreshing = undefined; });
    return this.#refreshing;
  }

  /** Whether the token is refused. Rejects (BackendUnavailableError) when the mirror is stale and the store does not answer. */
  async isRevoked(token: RevocableToken): Promise<boolean> {
    if (this.#clock() - this.#refreshedAt > STALE_AFTER_MS) await this.refresh();
    const now = seconds(this.#clock());
    return this.#matches(`token:${token.jti}`, token.iat, now)
      || (token.gid !== undefined && this.#matches(`grant:${token.gid}`, token.iat, now))
      || this.#matches(`client:${token.client_id}`, token.iat, now)
      || (token.gid === undefined && this.#matches(`client_credentials:${token.client_id}`, token.iat, now))
      || audiences(token).some((resource) => this.#matches(`resource:${resource}`, token.iat, now));
  }

  async revokeGrant(grantId: string): Promise<void> {
    await this.#add(revocationEntries.grant(grantId, seconds(this.#clock())));
  }

  async revokeDeletedClient(clientId: string): Promise<void> {
    await this.#add(revocationEntries.deletedClient(clientId, seconds(this.#clock())));
  }

  async revokeToken(token: RevocableToken): Promise<void> {
    const owner = ownerOf(token);
    const full = (this.#perOwner.get(owner) ?? 0) >= TOKEN_REVOCATIONS_PER_OWNER;
    await this.#add(full ? revocationEntries.issuedUntil(owner, token, seconds(this.#clock())) : revocationEntries.token(token));
  }

  /** Written to the store first, so a revocation this instance confirms is one every instance will see. */
  async #add(entry: RevocationEntry): Promise<void> {
    await this.#store.add(entry);
    this.#apply(entry);
  }

  async #read(): Promise<void> {
    const startedAt = this.#clock();
    const { entries, cursor } = await this.#store.changesSince(this.#cursor);
    for (const entry of entries) this.#apply(entry);
    this.#cursor = cursor;
    this.#refreshedAt = startedAt;
    if (startedAt - this.#prunedAt > PRUNE_INTERVAL_MS) {
      this.#prunedAt = startedAt;
      this.#prune(seconds(startedAt));
    }
  }

  #matches(key: string, issuedAt: number, now: number): boolean {
    const entry = this.#entries.get(key);
    return entry !== undefined && entry.expiresAt > now && issuedAt < entry.issuedBefore;
  }

  #apply(entry: RevocationEntry): void {
    const previous = this.#entries.get(entry.key);
    if (!previous) {
      this.#entries.set(entry.key, entry);
      if (entry.owner) this.#perOwner.set(entry.owner, (this.#perOwner.get(entry.owner) ?? 0) + 1);
      return;
    }
    previous.issuedBefore = Math.max(previous.issuedBefore, entry.issuedBefore);
    previous.expiresAt = Math.max(previous.expiresAt, entry.expiresAt);
  }

  #prune(now: number): void {
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAt > now) continue;
      this.#entries.delete(key);
      if (!entry.owner) continue;
      const left = (this.#perOwner.get(entry.owner) ?? 1) - 1;
      if (left > 0) this.#perOwner.set(entry.owner, left);
      else this.#perOwner.delete(entry.owner);
    }
  }

  /** How many entries the mirror holds (operators' metrics, tests). */
  get size(): number {
    return this.#entries.size;
  }
}
