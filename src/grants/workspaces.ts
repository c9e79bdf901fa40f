import type { ModelStore } from '../../adapters/store.ts';

/** Grants whose workspace is kept in process; the least recently used go first. */
const CACHED_GRANTS = 10_000;

/**
 * The workspace a user chose at consent, kept per grant so every code, refresh token and access
 * token of that grant names it. Stored beside the engine's models, removed with the grant.
 * A grant's workspace never changes, so each instance also keeps the answers it read: every
 * refresh reads it, and a revoked grant is refused by the engine before anyone asks.
 */
export class GrantWorkspaces {
  static readonly MODEL = 'GrantWorkspace';
  readonly #store: ModelStore;
  readonly #known = new Map<string, string>();

  constructor(store: ModelStore) {
    this.#store = store;
  }

  async bind(grantId: string, workspaceId: string, expiresIn: number): Promise<void> {
    await this.#store.upsert(grantId, { grantId, workspaceId }, expiresIn);
  }

  async workspaceOf(grantId: string): Promise<string | undefined> {
    const known = this.#known.get(grantId);
    if (known) {
      this.#known.delete(grantId);
      this.#known.set(grantId, known);
      return known;
    }
    const record = await this.#store.find(grantId);
    const workspaceId = typeof record?.workspaceId === 'string' ? record.workspaceId : undefined;
    if (workspaceId) {
      if (this.#known.size >= CACHED_GRANTS) this.#known.delete(this.#known.keys().next().value!);
      this.#known.set(grantId, workspaceId);
    }
    return workspaceId;
  }

  async unbind(grantId: string): Promise<void> {
    this.#known.delete(grantId);
    await this.#store.destroy(grantId);
  }
}
