import { calculateJwkThumbprint, decodeProtectedHeader } from 'jose';
import { Provider, type RefreshToken } from 'oidc-provider';

/**
 * Binds a public client's refresh token to the key of the DPoP proof its refresh came with, when
 * the token it replaces was bound to none (a code redeemed without a proof). RFC 9449 section 5:
 * a refresh token issued to a public client that presents a valid proof MUST be bound to that
 * key. The engine binds the refresh token issued at the code exchange, and at a rotation copies
 * the binding of the token it replaces, so without this a chain begun without a proof stays a
 * bearer chain whatever proofs its refreshes carry.
 *
 * It replaces the one method that stores a refresh token, so it runs after the engine has verified
 * the request's proof (its signature, method, URL, time and nonce) and everything else the refresh
 * asks; the thumbprint is of the key the engine verified the proof with. Checked at each upgrade
 * of the pinned engine by the DPoP tests of refresh.
 */
export function proofBindsPublicClientRefreshTokens(provider: Provider): void {
  const prototype = provider.RefreshToken.prototype as unknown as { save(this: RefreshToken): Promise<string> };
  const save = prototype.save;
  prototype.save = async function saveBound(this: RefreshToken) {
    const proof = unboundPublicRefreshProof(this);
    if (proof) {
      const { jwk } = decodeProtectedHeader(proof);
      if (jwk) this.jkt = await calculateJwkThumbprint(jwk);
    }
    return save.call(this);
  };
}

/** The DPoP proof of the refresh under way, when the token about to be stored is a public client's, bound to no key. */
function unboundPublicRefreshProof(token: RefreshToken): string | undefined {
  const ctx = Provider.ctx;
  if (token.jkt || ctx?.oidc?.route !== 'token' || ctx.oidc.params?.grant_type !== 'refresh_token') return undefined;
  if (ctx.oidc.client?.clientAuthMethod !== 'none') return undefined;
  return ctx.get('DPoP') || undefined;
}
