import type { Middleware } from 'koa';
import type { Provider } from 'oidc-provider';

import { confirmHeldLogoutReturns, holdUnconfirmedLogoutReturn } from '../../interactions/logout_return.ts';
import { formPostAsGet, restorePostedForm, type PostedFormSteps } from '../form_post_as_get.ts';
import type { PostedForms } from '../posted_forms.ts';

/**
 * /oauth/logout (OpenID Connect RP-Initiated Logout 1.0), served by the engine with the product's
 * pages (src/interactions/logout.ts). Before the engine:
 * 1. POST is answered with 303 to a GET naming the form parked in the store (section 2 asks for
 *    both), and on that GET the form becomes the request's query (src/http/form_post_as_get.ts);
 * 2. a post_logout_redirect_uri that neither a valid id_token_hint nor an operator's vetting
 *    vouches for is taken out of the request; the signed-out page offers it as a link instead
 *    (section 3; src/interactions/logout_return.ts), for the sign-out this request asks for only:
 *    a request that holds nothing forgets an earlier one's, and the engine's acceptance of the
 *    confirmation form (its end_session.success event) is what lets the page offer it.
 */
export function logoutEndpoint(provider: Provider, cookiePath: string, forms: PostedForms): Middleware[] {
  confirmHeldLogoutReturns(provider, cookiePath);
  return [restorePostedForm(forms, REQUEST_NAME), holdUnconfirmedLogoutReturn(provider, cookiePath)];
}

export function logoutByPost(posted: PostedFormSteps, issuer: string, path: string): Middleware {
  return formPostAsGet(posted, `${issuer}${path}`, REQUEST_NAME);
}

const REQUEST_NAME = 'logout request';
