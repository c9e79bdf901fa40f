import { Provider, type AuthorizationCode, type KoaContextWithOIDC, type RefreshToken } from 'oidc-provider';
import type { errors } from 'oidc-provider';

/**
 * Refusals that depend on the code or refresh token a token request redeems (the grant lacks the
 * `resource` named, or the API its token would be for takes DPoP-bound tokens only), found by the
 * host before the engine runs but thrown where the engine uses the code or refresh token up. By
 * then the engine has checked everything else they take (the client's authentication, that they
 * are that client's and still good, the PKCE verifier, the DPoP key a refresh token is bound to),
 * and nothing is used up yet: a request that is refused uses up nothing (the client's retry is no
 * replay), and no one is told anything of a code or refresh token they could not use (they are
 * refused as for any other).
 */
const held = new WeakMap<object, errors.OIDCProviderError>();

/** Holds `refusal` for the request `ctx` until the engine is about to use up what it redeems. */
export function refuseAtRedemption(ctx: object, refusal: errors.OIDCProviderError): void {
  held.set(ctx, refusal);
}

/** Makes the engine throw the refusal held for the request, if any, just before it uses up a code or a refresh token. */
export function refusalsHeldUntilRedemption(provider: Provider): void {
  for (const model of [provider.AuthorizationCode, provider.RefreshToken]) {
    const prototype = model.prototype as unknown as { consume(this: AuthorizationCode | RefreshToken): Promise<void> };
    const consume = prototype.consume;
    prototype.consume = async function consumeUnlessRefused(this: AuthorizationCode | RefreshToken) {
      const ctx: object | undefined = Provider.ctx;
      const refusal = ctx && held.get(ctx);
      if (refusal) throw refusal;
      return consume.call(this);
    };
  }
}

/**
 * A refresh token the engine does not rotate (a FAPI 2.0 client's) is never used up: the refusal
 * held for its request is thrown where the engine decides so, which is where it would have used it
 * up, once it has checked the rest.
 */
export function refusedUnlessRotated(rotates: (ctx: KoaContextWithOIDC) => boolean): (ctx: KoaContextWithOIDC) => boolean {
  return (ctx) => {
    const rotating = rotates(ctx);
    const refusal = rotating ? undefined : held.get(ctx);
    if (refusal) throw refusal;
    return rotating;
  };
}
