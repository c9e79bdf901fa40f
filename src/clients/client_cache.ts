import type { ModelPayload, ModelStore } from '../../adapters/store.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';
/** Clients kept at most; the least recently read go first. */
const MAX_CACHED_CLIENTS = 10_000;

/**
 * The Client model's store with an in-process read cache, so authenticating a client does not
 * read the store on every token request. A record is served for PROPAGATION_BOUND_MS after it was
 * read: the longest an update or deletion made elsewhere goes unseen here; the instance that makes
 * the change forgets its copy at once. Unknown ids are never cached: a client registered through
 * another instance is found at once.
 */
export class CachedClients implements ModelStore {
  readonly #models: ModelStore;
  readonly #clock: () => number;
  readonly #records = new Map<string, { payload: ModelPayload; readAt: number }>();
  /** Counts writes, so a read that an update overtook does not cache what it read. */
  #writes = 0;

  constructor(models: ModelStore, clock: () => number = Date.now) {
    this.#models = models;
    this.#clock = clock;
  }

  async find(id: string) {
    const cached = this.#records.get(id);
    const now = this.#clock();
    if (cached && now - cached.readAt < PROPAGATION_BOUND_MS) {
      // Re-inserted so the Map's order is least recently read first.
      this.#records.delete(id);
      this.#records.set(id, cached);
      return cached.payload;
    }
    const writesBefore = this.#writes;
    const payload = await this.#models.find(id);
    this.#records.delete(id);
    if (payload && writesBefore === this.#writes) this.#remember(id, payload, now);
    return payload;
  }

  async upsert(id: string, payload: ModelPayload, expiresIn: number | undefined) {
    // Before and after: a read that starts while the write is under way may see the old record.
    this.#forget(id);
    await this.#models.upsert(id, payload, expiresIn);
    this.#forget(id);
  }

  async destroy(id: string) {
    this.#forget(id);
    await this.#models.destroy(id);
    this.#forget(id);
  }

  findByUid(uid: string) {
    return this.#models.findByUid(uid);
  }

  findByUserCode(userCode: string) {
    return this.#models.findByUserCode(userCode);
  }

  consume(id: string) {
    return this.#models.consume(id);
  }

  countUse(id: string, limit: number) {
    return this.#models.countUse(id, limit);
  }

  revokeByGrantId(grantId: string) {
    return this.#models.revokeByGrantId(grantId);
  }

  list() {
    return this.#models.list();
  }

  listBy(value: string) {
    return this.#models.listBy(value);
  }

  #forget(id: string): void {
    this.#writes += 1;
    this.#records.delete(id);
  }

  #remember(id: string, payload: ModelPayload, now: number): void {
    if (this.#records.size >= MAX_CACHED_CLIENTS) this.#records.delete(this.#records.keys().next().value!);
    this.#records.set(id, { payload, readAt: now });
  }
}
