import { errors, type AccessToken, type Client, type ClientCredentials, type KoaContextWithOIDC, type RefreshToken } from 'oidc-provider';

/** What a revocation request does with a token it found valid. */
export type RevocationOutcome = 'revoke' | 'ignore' | 'refuse';

/** The refusal's description, the engine's own words. */
export const NOT_THE_CALLERS_TOKEN = 'client is not authorized to revoke the presented token';

/**
 * Who may revoke a valid token (RFC 7009 section 2.1). One rule for both halves of the endpoint:
 * the engine's (refresh tokens, through `allowedPolicy` below) and the host's (JWT access tokens,
 * src/http/endpoints/revocation.ts). An invalid or unknown token is answered 200 without effect
 * before this is asked.
 *
 * - A client revokes the tokens issued to itself.
 * - A confidential client presenting another client's token is refused, 400 `invalid_request`:
 *   RFC 7009 says "the request is refused". It learns the token is valid, which is of no use to it
 *   without its owner's credentials.
 * - A public client presenting another client's token is answered 200 without effect: its id
 *   proves nothing (RFC 6749 section 2.1), so anyone could otherwise call as that client to learn
 *   whether a token they hold is valid.
 */
export function revocationOutcome(caller: Client, tokenClientId: string | undefined): RevocationOutcome {
  if (tokenClientId === caller.clientId) return 'revoke';
  return caller.clientAuthMethod === 'none' ? 'ignore' : 'refuse';
}

/** `features.revocation.allowedPolicy`: the rule for the tokens the engine revokes itself. */
export function revocationAllowedPolicy(_ctx: KoaContextWithOIDC, caller: Client, token: AccessToken | ClientCredentials | RefreshToken): boolean {
  // A rotated-out refresh token (the engine is handed one consumed, src/engine/refresh_tokens.ts)
  // is no valid token: another client is answered as for any invalid one (RFC 7009 section 2.2),
  // and learns nothing of whether its grant is still live.
  if (token.clientId !== caller.clientId && isConsumed(token)) return false;
  const outcome = revocationOutcome(caller, token.clientId);
  if (outcome === 'refuse') throw new errors.InvalidRequest(NOT_THE_CALLERS_TOKEN);
  return outcome === 'revoke';
}

/** Whether the engine found the token already used (its consumable models set `consumed`, missing from its typings). */
function isConsumed(token: object): boolean {
  return Boolean((token as { consumed?: unknown }).consumed);
}
