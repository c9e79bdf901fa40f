import type { Middleware } from 'koa';

import { tokenRequestForm } from '../token_request_form.ts';

/**
 * A token request's `resource` (RFC 8707) is checked before the engine runs. The engine checks it
 * only after it has consumed the authorization code or rotated the refresh token, so a request it
 * then refused with invalid_target had used them up, and the client's retry with what it still
 * holds was taken for a replay, which revokes the whole grant. Every token is for the data API
 * (access_tokens.ts), so anything else, or more than one value, is refused here, untouched.
 */
export function refuseUnknownResource(audience: string): Middleware {
  return async (ctx, next) => {
    const resources = (await tokenRequestForm(ctx))?.getAll('resource') ?? [];
    if (resources.length === 0 || (resources.length === 1 && resources[0] === audience)) return next();
    ctx.status = 400;
    ctx.set('Cache-Control', 'no-store');
    // Browser clients read the token endpoint's answers; the engine's own CORS never runs for this one.
    if (!ctx.response.get('Access-Control-Allow-Origin')) ctx.set('Access-Control-Allow-Origin', '*');
    ctx.body = {
      error: 'invalid_target',
      error_description: resources.length > 1
        ? 'one resource at most: every token of this server is for the data API'
        : `unknown resource; this server issues tokens for ${audience} only`,
    };
  };
}
