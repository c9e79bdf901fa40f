import { errors } from 'oidc-provider';
import type { Adapter, AdapterPayload } from 'oidc-provider';

import type { ModelPayload, ModelStore, Store } from '../../adapters/store.ts';
import { CachedClients } from './client_cache.ts';
import { withHashedSecret } from './client_secrets.ts';
import { GrantWorkspaces } from './grant_workspaces.ts';
import type { RevocationList } from './revocation_list.ts';

/** What the engine adapter adds to a model's store. */
interface ModelHooks {
  beforeStore?: (payload: ModelPayload) => ModelPayload;
  afterDestroy?: (id: string) => Promise<void>;
  afterRevokeByGrantId?: (grantId: string) => Promise<void>;
}

/**
 * The engine's adapter contract, served by the configured Store. Adds what the engine leaves to
 * its adapter: atomic consumption (exactly one concurrent redemption of a code or refresh token
 * wins), client secrets stored hashed, client records cached in process, grant-scoped records
 * removed with their grant, and the revocation of JWT access tokens, which are never stored:
 * the engine revokes a grant's access tokens by grant id (refresh-token reuse, code replay, RFC
 * 7009 revocation of a refresh token) and deletes a client through the Client adapter.
 */
export function engineAdapterFactory(store: Store, grantWorkspaces: GrantWorkspaces, revocations: RevocationList) {
  return (name: string): Adapter => {
    const models = store.model(name);
    switch (name) {
      case 'Client':
        return new EngineAdapter(new CachedClients(models), {
          beforeStore: withHashedSecret,
          afterDestroy: (clientId) => revocations.revokeDeletedClient(clientId),
        });
      case 'Grant':
        return new EngineAdapter(models, { afterDestroy: (grantId) => grantWorkspaces.unbind(grantId) });
      case 'AccessToken':
        return new EngineAdapter(models, { afterRevokeByGrantId: (grantId) => revocations.revokeGrant(grantId) });
      default:
        return new EngineAdapter(models);
    }
  };
}

class EngineAdapter implements Adapter {
  readonly #models: ModelStore;
  readonly #hooks: ModelHooks;

  constructor(models: ModelStore, hooks: ModelHooks = {}) {
    this.#models = models;
    this.#hooks = hooks;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn: number) {
    const record = payload as ModelPayload;
    await this.#models.upsert(id, this.#hooks.beforeStore ? this.#hooks.beforeStore(record) : record, expiresIn || undefined);
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
    await this.#hooks.afterDestroy?.(id);
  }

  async revokeByGrantId(grantId: string) {
    await this.#models.revokeByGrantId(grantId);
    await this.#hooks.afterRevokeByGrantId?.(grantId);
  }
}
