import { errors, Provider, type AuthorizationCode } from 'oidc-provider';
import revoke from 'oidc-provider/lib/helpers/revoke.js';

import type { GrantWorkspaces } from '../grants/workspaces.ts';

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
 * The store answers the same when the code is gone (it expired that moment, or its grant was
 * revoked): the code's record, read again, tells the two apart, and only a code another redemption
 * used ends the grant.
 *
 * Revoking while the winner may still be issuing its tokens leaves it nothing usable: its access
 * token names the grant, which the revocation list refuses whenever the token was issued, and its
 * refresh token is refused once the grant record is gone. The revocation is the engine's own.
 * The winner still answers with its tokens, as it would had the other redemption come a moment
 * later: the grant's workspace, which its tokens name and the revocation removes, is read before
 * the code is consumed and held for the redemption.
 */
export function codeRedemptionRacesRevokeTheGrant(provider: Provider, grantWorkspaces: GrantWorkspaces): void {
  const prototype = provider.AuthorizationCode.prototype as unknown as { consume(this: AuthorizationCode): Promise<void> };
  const consume = prototype.consume;
  prototype.consume = async function consumeOrRevoke(this: AuthorizationCode) {
    try {
      await grantWorkspaces.holdForRedemption(this);
      return await consume.call(this);
    } catch (error) {
      if (!(error instanceof CodeUsedByAnother)) throw error;
      // `consumed` is the engine's (its consumable models set it), missing from its typings.
      const now = this.jti ? await provider.AuthorizationCode.find(this.jti, { ignoreExpiration: true }) as { consumed?: unknown } | undefined : undefined;
      if (!now?.consumed) throw new errors.InvalidGrant('authorization code not found');
      const ctx = Provider.ctx;
      if (ctx) await revoke(ctx, this.grantId);
      throw error;
    }
  };
}
