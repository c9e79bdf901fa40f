import { randomBytes } from 'node:crypto';

import type { ApiKeyRecord, ApiKeyStore } from '../../adapters/store.ts';
import { digest } from '../shared/digest.ts';
import { hasBidiControl, hasControlCharacter, hasInvisibleCharacter, hasStackedMarks } from '../shared/hidden_characters.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';
import { apiKeyHint, generateApiKey, isWellFormedApiKey } from './format.ts';
import { boundedCache, type BoundedCache } from '../shared/bounded_cache.ts';
import { nowSeconds, systemClock, type Clock } from '../shared/clock.ts';

/** Keys kept verified in process at most; the least recently used go first. */
const MAX_CACHED_KEYS = 10_000;
/** Last use is recorded to this precision, so a busy key costs one store write a minute, not one per request. */
const LAST_USED_RESOLUTION_SECONDS = 60;
export const MAX_NAME_LENGTH = 100;

export class ApiKeyError extends Error {
  override name = 'ApiKeyError';
}

/** A new key refused because an active key of the workspace has its name (as a person reads it: sameKeyName). */
export class ApiKeyNameTaken extends ApiKeyError {
  override name = 'ApiKeyNameTaken';
  /** The key that has the name. */
  readonly taken: ApiKeyRecord;

  constructor(taken: ApiKeyRecord) {
    super(`the workspace already has an active key named "${taken.name}": give this one another name, or revoke that one first`);
    this.taken = taken;
  }
}

/**
 * Whether two key names read as one to a person: trimmed, in one Unicode form (NFC), ignoring case
 * (upper case then lower, so "STRASSE" is "straße" and a final sigma is a sigma). The lists and the
 * revocation's confirmation tell keys apart by their names.
 */
export function sameKeyName(a: string, b: string): boolean {
  return keyNameFolded(a) === keyNameFolded(b);
}

function keyNameFolded(name: string): string {
  return name.trim().normalize('NFC').toUpperCase().toLowerCase().normalize('NFC');
}

export interface NewApiKey {
  /** The key itself: shown once, never stored. */
  key: string;
  record: ApiKeyRecord;
}

/**
 * A workspace's API keys: creation, listing, revocation, and verification of a presented key.
 *
 * A key is stored only as its digest. A verified key is served from process memory for
 * PROPAGATION_BOUND_MS after it was read, the longest a revocation made elsewhere goes unseen here
 * (the instance that revokes forgets at once; the admin CLI waits the bound). Expiry is checked on
 * every use. Unknown keys are never cached, so a new key works at once everywhere.
 */
export class ApiKeys {
  readonly #store: ApiKeyStore;
  readonly #clock: Clock;
  readonly #onTouchError: (error: unknown) => void;
  /** Verified keys by digest, each kept as read: #recordUse updates its last-use time in place. */
  readonly #verified: BoundedCache<string, ApiKeyRecord>;

  constructor(store: ApiKeyStore, options: { clock?: Clock; onTouchError?: (error: unknown) => void } = {}) {
    this.#store = store;
    this.#clock = options.clock ?? systemClock;
    this.#onTouchError = options.onTouchError ?? (() => undefined);
    this.#verified = boundedCache({ max: MAX_CACHED_KEYS, ttlMs: PROPAGATION_BOUND_MS, clock: this.#clock });
  }

  async create(workspaceId: string, name: string, expiresInSeconds?: number): Promise<NewApiKey> {
    const trimmed = name.trim();
    // Characters as a person counts them; a line separator breaks the CLI's lists as a line feed would.
    if (!trimmed || [...trimmed].length > MAX_NAME_LENGTH || hasControlCharacter(trimmed)) {
      throw new ApiKeyError(`the key needs a name of 1 to ${MAX_NAME_LENGTH} printable characters`);
    }
    // A name shown to the admins who revoke keys reads as what it is, as workspace and user names do.
    if (hasBidiControl(trimmed) || hasInvisibleCharacter(trimmed) || hasStackedMarks(trimmed)) {
      throw new ApiKeyError('the key\'s name cannot contain a character that changes the direction text is shown in, an invisible one, or a pile of combining marks');
    }
    if (expiresInSeconds !== undefined && (!Number.isSafeInteger(expiresInSeconds) || expiresInSeconds <= 0)) {
      throw new ApiKeyError('the expiry must be a positive number of seconds');
    }
    // Only the workspace's active keys are listed: a revoked key's record is gone, an expired one's
    // not listed, so their names may be used again. Two creates at the same moment may both pass
    // this check and make two keys of one name; nothing stops that but a unique index, which a
    // name freed by expiry would need swept first.
    const taken = (await this.#store.list(workspaceId)).find((existing) => sameKeyName(existing.name, trimmed));
    if (taken) throw new ApiKeyNameTaken(taken);
    const key = generateApiKey();
    const now = this.#seconds();
    const record: ApiKeyRecord = {
      id: newApiKeyId(),
      workspaceId,
      name: trimmed,
      digest: digest(key),
      hint: apiKeyHint(key),
      createdAt: now,
      ...(expiresInSeconds === undefined ? {} : { expiresAt: now + expiresInSeconds }),
    };
    await this.#store.create(record);
    return { key, record };
  }

  list(workspaceId: string): Promise<ApiKeyRecord[]> {
    return this.#store.list(workspaceId);
  }

  get(id: string): Promise<ApiKeyRecord | undefined> {
    return this.#store.get(id);
  }

  /** Deletes the key; undefined when there is none with this id. */
  async revoke(id: string): Promise<ApiKeyRecord | undefined> {
    const key = await this.#store.get(id);
    if (!key || !await this.#store.delete(id)) return undefined;
    this.#verified.delete(key.digest);
    return key;
  }

  /** The key a presented credential is, or undefined for anything not a live key (checksum first: a typo costs no store read). */
  async verify(presented: string): Promise<ApiKeyRecord | undefined> {
    if (!isWellFormedApiKey(presented)) return undefined;
    const keyDigest = digest(presented);
    const key = await this.#find(keyDigest);
    const now = this.#seconds();
    if (!key) return undefined;
    if (key.expiresAt !== undefined && key.expiresAt <= now) {
      this.#verified.delete(keyDigest);
      return undefined;
    }
    this.#recordUse(key, now);
    return key;
  }

  async #find(keyDigest: string): Promise<ApiKeyRecord | undefined> {
    const cached = this.#verified.get(keyDigest);
    if (cached) return cached;
    const key = await this.#store.findByDigest(keyDigest);
    if (key) this.#verified.set(keyDigest, key);
    return key;
  }

  /** Written in the background: a request never waits for, or fails on, the record of its own use. */
  #recordUse(key: ApiKeyRecord, now: number): void {
    if (key.lastUsedAt !== undefined && now - key.lastUsedAt < LAST_USED_RESOLUTION_SECONDS) return;
    key.lastUsedAt = now;
    this.#store.touch(key.id, now).catch(this.#onTouchError);
  }

  #seconds(): number {
    return nowSeconds(this.#clock);
  }
}

/** An API key's id, which lists show and revocation takes (not a secret: the key is another value). */
function newApiKeyId(): string {
  return `key_${randomBytes(9).toString('base64url')}`;
}

/** Whether a value has the shape of an API key's id (newApiKeyId's prefix and characters; mistyped or cut too), whether or not one exists. */
export function hasApiKeyIdShape(value: string): boolean {
  return /^key_[A-Za-z0-9_-]{1,24}$/.test(value);
}
