import type { ModelStore } from '../../adapters/store.ts';
import { boundedCache } from '../shared/bounded_cache.ts';

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
  readonly #known = boundedCache<string, string>({ max: CACHED_GRANTS });
  readonly #heldForRedemption = new WeakMap<object, string>();

  constructor(store: ModelStore) {
    this.#store = store;
  }

  async bind(grantId: string, workspaceId: string, expiresIn: number): Promise<void> {
    await this.#store.upsert(grantId, { grantId, workspaceId }, expiresIn);
  }

  /**
   * Reads the workspace of a code's grant before the code is consumed and holds it for that code's
   * redemption: a concurrent redemption that loses the code revokes the grant, which removes its
   * workspace while the winner is still issuing its tokens (concurrent_code_redemptions.ts).
   */
  async holdForRedemption(code: { grantId?: string | undefined }): Promise<void> {
    const workspaceId = code.grantId ? await this.workspaceOf(code.grantId) : undefined;
    if (workspaceId) this.#heldForRedemption.set(code, workspaceId);
  }

  /** The grant's workspace; `redeeming`, the code a request redeems, answers with what was held for it. */
  async workspaceOf(grantId: string, redeeming?: object): Promise<string | undefined> {
    const held = redeeming && this.#heldForRedemption.get(redeeming);
    if (held) return held;
    const known = this.#known.get(grantId);
    if (known) return known;
    const record = await this.#store.find(grantId);
    const workspaceId = typeof record?.workspaceId === 'string' ? record.workspaceId : undefined;
    if (workspaceId) this.#known.set(grantId, workspaceId);
    return workspaceId;
  }

  async unbind(grantId: string): Promise<void> {
    this.#known.delete(grantId);
    await this.#store.destroy(grantId);
  }
}
