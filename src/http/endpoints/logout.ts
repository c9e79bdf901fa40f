import type { Middleware } from 'koa';
import type { Provider } from 'oidc-provider';

import { confirmHeldLogoutReturns, holdUnconfirmedLogoutReturn } from '../../interactions/logout_return.ts';
import { formPostAsGet } from '../form_post_as_get.ts';

/**
 * /oauth/logout (OpenID Connect RP-Initiated Logout 1.0), served by the engine with the product's
 * pages (src/interactions/logout.ts). Before the engine:
 * 1. POST is answered with 303 to the same request as GET (section 2 asks for both);
 * 2. a post_logout_redirect_uri that neither a valid id_token_hint nor an operator's vetting
 *    vouches for is taken out of the request; the signed-out page offers it as a link instead
 *    (section 3; src/interactions/logout_return.ts), for the sign-out this request asks for only:
 *    a request that holds nothing forgets an earlier one's, and the engine's acceptance of the
 *    confirmation form (its end_session.success event) is what lets the page offer it.
 */
export function logoutEndpoint(provider: Provider, cookiePath: string): Middleware[] {
  confirmHeldLogoutReturns(provider, cookiePath);
  return [holdUnconfirmedLogoutReturn(provider, cookiePath)];
}

export function logoutByPost(issuer: string, path: string): Middleware {
  return formPostAsGet(`${issuer}${path}`, 'logout request');
}
