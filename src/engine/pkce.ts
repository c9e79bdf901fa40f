import type { Client, KoaContextWithOIDC } from 'oidc-provider';

import type { PkcePolicy } from '../../config/index.ts';

/**
 * The engine's `pkce.required`: which authorization requests must carry a code_challenge.
 *
 * `all` (the default): every one. `public`: public clients and every plain OAuth request still
 * must; a confidential client's OpenID Connect request (scope `openid`) may omit it, as RFC 9700
 * section 2.1.1 allows (its nonce, or its client authentication at the token endpoint, binds the
 * code) and OpenID Connect Core permits; the OpenID Foundation's conformance plans send no PKCE.
 * A client `alwaysFor` names (FAPI 2.0 clients) must, whatever the policy. Whatever the policy,
 * the engine refuses `plain` and a challenge redeemed without its verifier.
 */
export function pkceRequired(policy: PkcePolicy, alwaysFor: (client: Client) => boolean): (ctx: KoaContextWithOIDC, client: Client) => boolean {
  if (policy === 'all') return () => true;
  return (ctx, client) => client.clientAuthMethod === 'none' || !isOpenIdRequest(ctx) || alwaysFor(client);
}

function isOpenIdRequest(ctx: KoaContextWithOIDC): boolean {
  const scope = ctx.oidc.params?.scope;
  return typeof scope === 'string' && scope.split(' ').includes('openid');
}
