import type { Middleware } from 'koa';

import { formPostAsGet } from '../form_post_as_get.ts';

/**
 * /oauth/logout (OpenID Connect RP-Initiated Logout 1.0), served by the engine with the product's
 * pages (src/interactions/logout.ts). Before the engine:
 * 1. POST is answered with 303 to the same request as GET (section 2 asks for both).
 */
export function logoutByPost(issuer: string, path: string): Middleware {
  return formPostAsGet(`${issuer}${path}`, 'logout request');
}
