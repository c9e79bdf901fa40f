import type { Adapter, AdapterPayload } from 'oidc-provider';

/**
 * The baseline's storage: plain Maps in process, the cheapest storage there is.
 *
 * Not the engine's default memory adapter, on purpose. That one is a development aid kept in an
 * LRU of 1,000 entries: under load it evicts live codes (400 invalid_grant) and registered clients
 * (401 invalid_client) within seconds. Giving it unbounded storage does not help either: it keeps
 * every token of a grant in one map and sweeps that whole map on every write, so with the bench's
 * one long-lived grant each token would cost more than the last. This adapter keeps the same
 * contract (expiry, consume, grant revocation, uid and user-code lookups) with O(1) operations.
 */

interface Entry {
  payload: AdapterPayload;
  /** Epoch milliseconds; Infinity for records without a lifetime (clients). */
  expiresAt: number;
}

const records = new Map<string, Entry>();
/** Record keys by grant, for revokeByGrantId. */
const byGrant = new Map<string, Set<string>>();
const sessionByUid = new Map<string, string>();
const idByUserCode = new Map<string, string>();

function live(key: string): AdapterPayload | undefined {
  const entry = records.get(key);
  if (!entry) return undefined;
  if (entry.expiresAt <= Date.now()) {
    records.delete(key);
    return undefined;
  }
  return entry.payload;
}

export class MemoryAdapter implements Adapter {
  readonly #model: string;

  constructor(model: string) {
    this.#model = model;
  }

  #key(id: string): string {
    return `${this.#model}:${id}`;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    const key = this.#key(id);
    records.set(key, { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : Number.POSITIVE_INFINITY });
    if (this.#model === 'Session' && payload.uid) sessionByUid.set(payload.uid, id);
    if (payload.userCode) idByUserCode.set(payload.userCode, id);
    if (payload.grantId) {
      let keys = byGrant.get(payload.grantId);
      if (!keys) byGrant.set(payload.grantId, keys = new Set());
      keys.add(key);
    }
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    return live(this.#key(id));
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    const id = sessionByUid.get(uid);
    return id === undefined ? undefined : this.find(id);
  }

  async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
    const id = idByUserCode.get(userCode);
    return id === undefined ? undefined : this.find(id);
  }

  async consume(id: string): Promise<void> {
    const payload = live(this.#key(id));
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id: string): Promise<void> {
    records.delete(this.#key(id));
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    for (const key of byGrant.get(grantId) ?? []) records.delete(key);
    byGrant.delete(grantId);
  }
}
