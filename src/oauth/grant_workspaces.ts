import type { ModelStore } from '../../adapters/store.ts';

/**
 * The workspace a user chose at consent, kept per grant so every code, refresh token and access
 * token of that grant names it. Stored beside the engine's models, removed with the grant.
 */
export class GrantWorkspaces {
  static readonly MODEL = 'GrantWorkspace';
  readonly #store: ModelStore;

  constructor(store: ModelStore) {
    this.#store = store;
  }

  async bind(grantId: string, workspaceId: string, expiresIn: number): Promise<void> {
    await this.#store.upsert(grantId, { grantId, workspaceId }, expiresIn);
  }

  async workspaceOf(grantId: string): Promise<string | undefined> {
    const record = await this.#store.find(grantId);
    return typeof record?.workspaceId === 'string' ? record.workspaceId : undefined;
  }

  async unbind(grantId: string): Promise<void> {
    await this.#store.destroy(grantId);
  }
}
