import { Provider } from 'oidc-provider';

/** What the engine's Client model has and its types leave out: the store adapter it reads clients through. */
interface ClientModel {
  adapter: { destroy(id: string): Promise<void> };
}

interface RegistrationAccessToken {
  clientId: string;
  save(): Promise<string>;
  destroy(): Promise<void>;
}

/**
 * A registration access token that cannot be stored leaves nothing half done. The engine stores
 * it last, after what it belongs to:
 * - a registration (RFC 7591) stores the client, then its token: when the token cannot be stored,
 *   the registration is answered with an error and the client, which nobody could manage or
 *   authenticate as, is removed again;
 * - an update (RFC 7592) that rotates the token destroys the one the request came with, then
 *   stores the new one: the old one's destroy waits until the new one is stored, so a failure at
 *   any point leaves the old token working, and the client's retry applies the update again.
 */
export function registrationTokenWritesLeaveNothingHalfDone(provider: Provider): void {
  const prototype = provider.RegistrationAccessToken.prototype as unknown as RegistrationAccessToken;
  const { destroy, save } = prototype;
  const destroyLater = new WeakMap<object, () => Promise<void>>();

  prototype.destroy = function destroyOnceSuccessorStored(this: RegistrationAccessToken) {
    const ctx = Provider.ctx;
    if (ctx?.oidc?.route === 'client_update' && ctx.oidc.entities.RotatedRegistrationAccessToken === this) {
      destroyLater.set(ctx, () => destroy.call(this));
      return Promise.resolve();
    }
    return destroy.call(this);
  };

  prototype.save = async function saveThenFinish(this: RegistrationAccessToken) {
    const ctx = Provider.ctx;
    let value: string;
    try {
      value = await save.call(this);
    } catch (error) {
      if (ctx?.oidc?.route === 'registration') await removeClient(provider, this.clientId);
      throw error;
    }
    const destroyPredecessor = ctx && destroyLater.get(ctx);
    if (destroyPredecessor) {
      destroyLater.delete(ctx);
      await destroyPredecessor();
    }
    return value;
  };
}

/** Best effort: a store that refused the token may refuse this too, and then the unused-client sweep removes it (src/clients/unused_clients.ts). */
async function removeClient(provider: Provider, clientId: string): Promise<void> {
  try {
    await (provider.Client as unknown as ClientModel).adapter.destroy(clientId);
  } catch {
    // The registration's own error is the one to answer.
  }
}
