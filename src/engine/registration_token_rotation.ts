import { Provider } from 'oidc-provider';

interface RegistrationAccessToken {
  save(): Promise<string>;
  destroy(): Promise<void>;
}

/**
 * An RFC 7592 update rotates the registration access token: the engine destroys the token the
 * request came with, then stores the new one. A store that fails between the two would leave the
 * client with no token at all: the update is answered 503, and the retry, with the only token the
 * client holds, is refused for ever after. Here the old token's destroy waits until the new one is
 * stored, so a failure at any point leaves the old token working, and the client's retry applies
 * the update again. (A registration that fails is undone by its endpoint: registration_writes.ts.)
 */
export function rotatedRegistrationTokenOutlivesItsSuccessor(provider: Provider): void {
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

  prototype.save = async function saveThenDestroyPredecessor(this: RegistrationAccessToken) {
    const value = await save.call(this);
    const ctx = Provider.ctx;
    const destroyPredecessor = ctx && destroyLater.get(ctx);
    if (destroyPredecessor) {
      destroyLater.delete(ctx);
      await destroyPredecessor();
    }
    return value;
  };
}
