import { errors } from 'oidc-provider';
import type { Adapter, AdapterPayload } from 'oidc-provider';

import type { ModelPayload, ModelStore, Store } from '../../adapters/store.ts';
import { withHashedSecret } from './client_secrets.ts';
import { GrantWorkspaces } from './grant_workspaces.ts';

/**
 * The engine's adapter contract, served by the configured Store. Adds what the engine leaves to
 * its adapter: atomic consumption (exactly one concurrent redemption of a code or refresh token
 * wins), client secrets stored hashed, and grant-scoped records removed with their grant.
 */
export function engineAdapterFactory(store: Store, grantWorkspaces: GrantWorkspaces) {
  return (name: string): Adapter => {
    const models = store.model(name);
    switch (name) {
      case 'Client':
        return new EngineAdapter(models, (payload) => withHashedSecret(payload));
      case 'Grant':
        return new EngineAdapter(models, undefined, (grantId) => grantWorkspaces.unbind(grantId));
      default:
        return new EngineAdapter(models);
    }
  };
}

class EngineAdapter implements Adapter {
  readonly #models: ModelStore;
  readonly #beforeStore: ((payload: ModelPayload) => ModelPayload) | undefined;
  readonly #afterDestroy: ((id: string) => Promise<void>) | undefined;

  constructor(models: ModelStore, beforeStore?: (payload: ModelPayload) => ModelPayload, afterDestroy?: (id: string) => Promise<void>) {
    this.#models = models;
    this.#beforeStore = beforeStore;
    this.#afterDestroy = afterDestroy;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn: number) {
    const record = payload as ModelPayload;
    await this.#models.upsert(id, this.#beforeStore ? this.#beforeStore(record) : record, expiresIn || undefined);
  }

  async find(id: string) {
    return await this.#models.find(id) as AdapterPayload | undefined;
  }

  async findByUid(uid: string) {
    return await this.#models.findByUid(uid) as AdapterPayload | undefined;
  }

  async findByUserCode(userCode: string) {
    return await this.#models.findByUserCode(userCode) as AdapterPayload | undefined;
  }

  async consume(id: string) {
    if (!await this.#models.consume(id)) {
      // Lost a race against another redemption of the same code or refresh token.
      throw new errors.InvalidGrant('grant already redeemed');
    }
  }

  async destroy(id: string) {
    await this.#models.destroy(id);
    await this.#afterDestroy?.(id);
  }

  async revokeByGrantId(grantId: string) {
    await this.#models.revokeByGrantId(grantId);
  }
}
