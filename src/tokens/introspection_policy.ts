import type { AccessToken, Client, ClientCredentials, KoaContextWithOIDC, RefreshToken } from 'oidc-provider';

import { introspectionAudience } from '../clients/resource_servers.ts';

/** What the policy needs to know of a token: from the engine's record, or from a verified JWT's claims. */
export interface IntrospectedToken {
  /** The client the token was issued to. */
  clientId: string | undefined;
  /** An access token's audience; undefined for a refresh token, which is for its own client alone. */
  audience: string | string[] | undefined;
}

/**
 * Who may learn what a token is (RFC 7662 section 4: least privilege). One rule for both halves
 * of the endpoint: the engine's (refresh tokens, through `allowedPolicy` below) and the host's
 * (JWT access tokens, src/http/endpoints/introspection.ts). Anyone else gets `{"active": false}`, exactly what an
 * unknown token gets, so a caller cannot tell a token it may not see from one that does not exist.
 *
 * - A confidential client may introspect the tokens issued to itself.
 * - A resource server an operator registered (src/clients/resource_servers.ts) may also introspect the
 *   access tokens meant for it: those whose `aud` is its resource. Never refresh tokens: a
 *   resource server never sees them.
 * - A public client (`token_endpoint_auth_method` none) may introspect nothing, not even its
 *   own tokens. RFC 7662 section 2.1 requires the endpoint to authorize its callers, to prevent
 *   token scanning; a public client's id is public and proves nothing (RFC 6749 section 2.1), so
 *   anyone could call as that client. And a public client has no use for it: it is never a
 *   protected resource, and it learns that its refresh token is gone by refreshing.
 */
export function mayIntrospect(caller: Client, token: IntrospectedToken): boolean {
  if (caller.clientAuthMethod === 'none') return false;
  if (token.clientId !== undefined && token.clientId === caller.clientId) return true;
  const audience = introspectionAudience(caller);
  if (audience === undefined || token.audience === undefined) return false;
  return Array.isArray(token.audience) ? token.audience.includes(audience) : token.audience === audience;
}

/** `features.introspection.allowedPolicy`: the rule for the tokens the engine introspects itself. */
export function introspectionAllowedPolicy(_ctx: KoaContextWithOIDC, caller: Client, token: AccessToken | ClientCredentials | RefreshToken): boolean {
  return mayIntrospect(caller, { clientId: token.clientId, audience: token.kind === 'RefreshToken' ? undefined : token.aud });
}
