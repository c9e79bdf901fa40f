import { errors } from 'oidc-provider';
import type { Adapter, AdapterPayload } from 'oidc-provider';

import type { ModelPayload, ModelStore, Store } from '../../adapters/store.ts';
import { CachedClients } from '../clients/client_cache.ts';
import { withHashedSecret } from '../clients/client_secrets.ts';
import type { GrantActivity } from '../grants/activity.ts';
import { GrantWorkspaces } from '../grants/workspaces.ts';
import { countInitialAccessTokenUse } from '../clients/initial_access_tokens.ts';
import { noteRegistrationWrite } from './registration_writes.ts';
import { claimRegistrationToken } from './registration_token_claims.ts';
import type { NewInteractionLimit } from '../rate_limits/limits.ts';
import { limitNewInteractions } from './new_interactions.ts';
import type { RecordsAtRest } from './records_at_rest.ts';
import type { RevocationList } from '../tokens/revocation_list.ts';
import { clientExpiry, registrationAccessTokenExpiry } from '../clients/unused_clients.ts';
import { CodeUsedByAnother } from './concurrent_code_redemptions.ts';
import { consumedTokenOf, type RefreshTokenRotations, type RefreshTokenValues } from './refresh_tokens.ts';

/** What the engine adapter adds to a model's store. */
interface ModelHooks {
  beforeStore?: (payload: ModelPayload) => ModelPayload;
  /** Runs before a record is stored; what it throws, the engine answers, and nothing is stored. */
  beforeUpsert?: (id: string) => Promise<void>;
  /** Runs once a record is stored; what it throws, the engine answers. */
  afterUpsert?: () => Promise<void>;
  /** The record's expiry as stored, from the engine's (an unused client's probation: src/clients/unused_clients.ts). */
  expiresIn?: (payload: ModelPayload, expiresIn: number | undefined) => number | undefined | Promise<number | undefined>;
  /** Runs before a record is destroyed; what it throws, the engine answers, and nothing is destroyed. */
  beforeDestroy?: () => Promise<void>;
  afterDestroy?: (id: string) => Promise<void>;
  afterRevokeByGrantId?: (grantId: string) => Promise<void>;
  /** Wraps the record's write (a refresh token rotation completes with it: refresh_tokens.ts). */
  aroundUpsert?: (storeId: string, write: () => Promise<void>) => Promise<void>;
  /** A consumption made at or before this time (epoch seconds) is abandoned, and taken over (ModelStore.consume). */
  takeOverConsumedBefore?: () => number | undefined;
  /** Runs once the caller has won the consumption of the record, under `claim`. */
  afterConsume?: (storeId: string, claim: string) => Promise<void>;
  /** What the caller that lost the consumption to another request is refused with (default: invalid_grant). */
  whenConsumedByAnother?: () => Error;
  /** What the engine is handed for a record found (it may refuse to hand it over). */
  whenFound?: (payload: AdapterPayload) => AdapterPayload;
  /** What the engine is handed for an id with no record (undefined: nothing). */
  whenMissing?: (id: string) => Promise<AdapterPayload | undefined>;
}

/**
 * The engine's adapter contract, served by the configured Store. Adds what the engine leaves to
 * its adapter: atomic consumption (exactly one concurrent redemption of a code or refresh token
 * wins), records stored so that a copy of the store holds no usable credential (records_at_rest.ts),
 * client secrets stored hashed, client records cached in process, the use of an initial access
 * token counted once the client it registers and its registration access token are stored (what a
 * registration stored is noted, for the registration endpoint to undo should it fail:
 * registration_writes.ts), grant-scoped records
 * removed with their grant, and the revocation of JWT access tokens, which are never stored:
 * the engine revokes a grant's access tokens by grant id (refresh-token reuse, code replay, RFC
 * 7009 revocation of a refresh token) and deletes a client through the Client adapter. A rotated
 * refresh token's record is deleted once consumed, and its value, which names its grant, still
 * recognised (refresh_tokens.ts), so a grant keeps one refresh token record however often it rotates;
 * it is deleted only once its successor is stored, and a rotation that fails to store it gives the
 * consumed token back (RefreshTokenRotations), so the client's retry with it is no reuse; nor is a
 * retry after a rotation cut short before it could do either (a crash, a lost primary).
 * With `newInteractions`, a new interaction is stored only within that limit (new_interactions.ts).
 */
export function engineAdapterFactory(
  store: Store, atRest: RecordsAtRest, grantWorkspaces: GrantWorkspaces, revocations: RevocationList, grantActivity: GrantActivity,
  refreshTokenValues: RefreshTokenValues, rotations: RefreshTokenRotations, newInteractions?: NewInteractionLimit,
) {
  const grants = new EngineAdapter('Grant', store.model('Grant'), atRest, {
    afterDestroy: async (grantId) => {
      await grantWorkspaces.unbind(grantId);
      await grantActivity.forget(grantId);
    },
  });
  return (name: string): Adapter => {
    const models = store.model(name);
    switch (name) {
      case 'Client': {
        // An RFC 7592 update or delete writes the client only once it holds its registration access token.
        const claimToken = claimRegistrationToken(store.model('RegistrationAccessToken'), (token) => atRest.id('RegistrationAccessToken', token));
        const noteWrite = noteRegistrationWrite('Client');
        return new EngineAdapter(name, new CachedClients(models), atRest, {
          beforeStore: withHashedSecret,
          beforeUpsert: async (id) => {
            await claimToken();
            await noteWrite(id);
          },
          beforeDestroy: claimToken,
          expiresIn: clientExpiry,
          afterDestroy: (clientId) => revocations.revokeDeletedClient(clientId),
        });
      }
      case 'Grant':
        return grants;
      case 'RefreshToken': {
        return new EngineAdapter(name, models, atRest, {
          takeOverConsumedBefore: () => rotations.abandonedBefore(),
          afterConsume: (storeId, claim) => rotations.consumed(storeId, claim),
          whenConsumedByAnother: () => rotations.underWay(),
          aroundUpsert: (storeId, write) => rotations.store(storeId, write),
          whenFound: (payload) => rotations.found(payload),
          whenMissing: async (id) => {
            const grantId = refreshTokenValues.grantOf(id);
            const grant = grantId && await grants.find(grantId);
            return grant ? consumedTokenOf(id, grantId, grant) : undefined;
          },
        });
      }
      case 'AuthorizationCode':
        return new EngineAdapter(name, models, atRest, { whenConsumedByAnother: () => new CodeUsedByAnother() });
      case 'AccessToken':
        return new EngineAdapter(name, models, atRest, { afterRevokeByGrantId: (grantId) => revocations.revokeGrant(grantId) });
      case 'RegistrationAccessToken':
        return new EngineAdapter(name, models, atRest, {
          expiresIn: registrationAccessTokenExpiry(store.model('Client')),
          // Stored last by a registration: the initial access token's use is counted once nothing else can fail.
          beforeUpsert: noteRegistrationWrite('RegistrationAccessToken'),
          afterUpsert: countInitialAccessTokenUse(store.model('InitialAccessToken'), (token) => atRest.id('InitialAccessToken', token)),
        });
      case 'Interaction':
        return new EngineAdapter(name, models, atRest, newInteractions ? { beforeUpsert: limitNewInteractions(newInteractions) } : {});
      default:
        return new EngineAdapter(name, models, atRest);
    }
  };
}

class EngineAdapter implements Adapter {
  readonly #name: string;
  readonly #models: ModelStore;
  readonly #atRest: RecordsAtRest;
  readonly #hooks: ModelHooks;

  constructor(name: string, models: ModelStore, atRest: RecordsAtRest, hooks: ModelHooks = {}) {
    this.#name = name;
    this.#models = models;
    this.#atRest = atRest;
    this.#hooks = hooks;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn: number) {
    await this.#hooks.beforeUpsert?.(id);
    const record = this.#hooks.beforeStore ? this.#hooks.beforeStore(payload as ModelPayload) : payload as ModelPayload;
    const expiry = this.#hooks.expiresIn ? await this.#hooks.expiresIn(record, expiresIn || undefined) : expiresIn || undefined;
    const storeId = this.#atRest.id(this.#name, id);
    const write = () => this.#models.upsert(storeId, this.#atRest.toStored(this.#name, record), expiry);
    await (this.#hooks.aroundUpsert ? this.#hooks.aroundUpsert(storeId, write) : write());
    await this.#hooks.afterUpsert?.();
  }

  async find(id: string) {
    const found = this.#fromStored(await this.#models.find(this.#atRest.id(this.#name, id)), id);
    if (!found) return this.#hooks.whenMissing?.(id);
    return this.#hooks.whenFound ? this.#hooks.whenFound(found) : found;
  }

  async findByUid(uid: string) {
    return this.#fromStored(await this.#models.findByUid(uid));
  }

  async findByUserCode(userCode: string) {
    return this.#fromStored(await this.#models.findByUserCode(this.#atRest.userCode(userCode)));
  }

  async consume(id: string) {
    const storeId = this.#atRest.id(this.#name, id);
    const claim = await this.#models.consume(storeId, this.#hooks.takeOverConsumedBefore?.());
    if (!claim) {
      // Lost a race against another redemption of the same code or refresh token.
      throw this.#hooks.whenConsumedByAnother?.() ?? new errors.InvalidGrant('grant already redeemed');
    }
    await this.#hooks.afterConsume?.(storeId, claim);
  }

  async destroy(id: string) {
    await this.#hooks.beforeDestroy?.();
    await this.#models.destroy(this.#atRest.id(this.#name, id));
    await this.#hooks.afterDestroy?.(id);
  }

  /** Deletes a record a failed request may have stored, as an undo (ModelStore.discard). */
  async discard(id: string) {
    await this.#models.discard(this.#atRest.id(this.#name, id));
  }

  async revokeByGrantId(grantId: string) {
    await this.#models.revokeByGrantId(grantId);
    await this.#hooks.afterRevokeByGrantId?.(grantId);
  }

  #fromStored(stored: ModelPayload | undefined, id?: string): AdapterPayload | undefined {
    return stored && this.#atRest.fromStored(this.#name, stored, id) as AdapterPayload;
  }
}
