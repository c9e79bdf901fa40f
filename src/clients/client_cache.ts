import type { ModelPayload, ModelStore } from '../../adapters/store.ts';
import { boundedCache, type BoundedCache } from '../shared/bounded_cache.ts';
import { systemClock, type Clock } from '../shared/clock.ts';
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
  readonly #records: BoundedCache<string, ModelPayload>;
  /** Counts writes, so a read that an update overtook does not cache what it read. */
  #writes = 0;

  constructor(models: ModelStore, clock: Clock = systemClock) {
    this.#models = models;
    this.#records = boundedCache({ max: MAX_CACHED_CLIENTS, ttlMs: PROPAGATION_BOUND_MS, clock });
  }

  async find(id: string) {
    const cached = this.#records.get(id);
    if (cached) return cached;
    const writesBefore = this.#writes;
    const payload = await this.#models.find(id);
    if (payload && writesBefore === this.#writes) this.#records.set(id, payload);
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

  async discard(id: string) {
    this.#forget(id);
    await this.#models.discard(id);
    this.#forget(id);
  }

  findByUid(uid: string) {
    return this.#models.findByUid(uid);
  }

  findByUserCode(userCode: string) {
    return this.#models.findByUserCode(userCode);
  }

  consume(id: string, takeOverBefore?: number) {
    return this.#models.consume(id, takeOverBefore);
  }

  release(id: string, claim: string) {
    return this.#models.release(id, claim);
  }

  async complete(id: string, claim: string) {
    this.#forget(id);
    const completed = await this.#models.complete(id, claim);
    this.#forget(id);
    return completed;
  }

  completionOf(id: string, claim: string) {
    return this.#models.completionOf(id, claim);
  }

  forgetCompletion(id: string, claim: string) {
    return this.#models.forgetCompletion(id, claim);
  }

  insertNew(id: string, payload: ModelPayload, expiresIn: number) {
    return this.#models.insertNew(id, payload, expiresIn);
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
}
