import { errors, Provider, type AuthorizationCode } from 'oidc-provider';
import revoke from 'oidc-provider/lib/helpers/revoke.js';

/** What a code exchange that lost its code to another redemption at the same moment is refused with. */
export class CodeUsedByAnother extends errors.InvalidGrant {
  constructor() {
    super('authorization code already consumed');
  }
}

/**
 * Makes a redemption that loses its code to another at the same moment end the code's grant, as
 * the engine does for a redemption that comes after (RFC 6749 section 4.1.2: a code used more than
 * once SHOULD revoke what it issued). The engine revokes only when it reads the code already used;
 * a concurrent redemption reads it unused, then loses at the store's atomic consumption
 * (adapter.ts), which the engine would answer without revoking.
 *
 * Revoking while the winner may still be issuing its tokens leaves it nothing usable: its access
 * token names the grant, which the revocation list refuses whenever the token was issued, and its
 * refresh token is refused once the grant record is gone. The revocation is the engine's own.
 */
export function codeRedemptionRacesRevokeTheGrant(provider: Provider): void {
  const prototype = provider.AuthorizationCode.prototype as unknown as { consume(this: AuthorizationCode): Promise<void> };
  const consume = prototype.consume;
  prototype.consume = async function consumeOrRevoke(this: AuthorizationCode) {
    try {
      return await consume.call(this);
    } catch (error) {
      const ctx = Provider.ctx;
      if (error instanceof CodeUsedByAnother && ctx) await revoke(ctx, this.grantId);
      throw error;
    }
  };
}
