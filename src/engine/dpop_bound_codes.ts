import { calculateJwkThumbprint, decodeJwt, decodeProtectedHeader } from 'jose';
import { errors, Provider, type AuthorizationCode } from 'oidc-provider';

import type { ModelStore } from '../../adapters/store.ts';
import { usedOnceMarkerId } from '../clients/client_assertions.ts';

/**
 * Makes the engine refuse a code exchange's DPoP proof before it uses the code up, where it would
 * refuse it only after (RFC 9449 sections 10 and 11.1): no proof for a code bound to a key
 * (`dpop_jkt` at the authorization request or PAR, or a proof at PAR), a proof of another key, or
 * a proof already used. The client's retry with the right proof then gets the tokens, rather than
 * being taken for a replay of the code, which revokes the whole grant.
 *
 * It replaces the one method that uses a code up, so it runs after the engine has verified the
 * proof (its signature, method, URL, time and nonce) and every other part of the request, and
 * reads nothing more for a request without a proof. Checked at each upgrade of the pinned engine
 * by the DPoP tests of the code exchange.
 */
export function proofCheckedBeforeCodeIsUsed(provider: Provider, markers: ModelStore): void {
  const prototype = provider.AuthorizationCode.prototype as unknown as { consume(this: AuthorizationCode): Promise<void> };
  const consume = prototype.consume;
  prototype.consume = async function consumeWithProof(this: AuthorizationCode) {
    const ctx = Provider.ctx;
    if (ctx?.oidc?.route === 'token') await assertProofFor(markers, this, ctx.get('DPoP'));
    return consume.call(this);
  };
}

async function assertProofFor(markers: ModelStore, code: AuthorizationCode, proof: string): Promise<void> {
  if (!proof) {
    if (code.dpopJkt) throw new errors.InvalidGrant('missing DPoP proof JWT');
    return;
  }
  // The engine has verified the proof: its header and claims are what it checked.
  const { jwk } = decodeProtectedHeader(proof);
  if (code.dpopJkt && jwk && await calculateJwkThumbprint(jwk) !== code.dpopJkt) {
    throw new errors.InvalidGrant('DPoP proof key thumbprint does not match dpop_jkt');
  }
  // Where a proof taken is recorded (ReplayDetection.unique, src/clients/client_assertions.ts), read without recording it.
  const { jti } = decodeJwt(proof);
  if (typeof jti === 'string' && code.clientId && await markers.find(usedOnceMarkerId(code.clientId, jti))) {
    throw new errors.InvalidGrant('DPoP proof JWT Replay detected');
  }
}
