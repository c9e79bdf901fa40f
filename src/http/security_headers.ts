import type { Middleware } from 'koa';

import { isNoStore, noStore } from '../shared/no_store.ts';

/**
 * Headers every response carries. Pages are never framed (clickjacking), load nothing from
 * elsewhere and run no script; a rendered page replaces the policy with its own, which carries a
 * nonce for its style (src/pages/render.ts). An answer the engine marked `no-store` (its tokens,
 * a registered client's secret) gets the rest of what no_store.ts sends with it.
 */
export function securityHeaders(formPostPaths: readonly string[]): Middleware {
  const answersFormPost = (path: string) => {
    for (const prefix of formPostPaths) if (path.startsWith(prefix)) return true;
    return false;
  };
  return (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
    ctx.set('Content-Security-Policy', answersFormPost(ctx.path) ? FORM_POST_POLICY : DEFAULT_POLICY);
    // A year, for every subdomain too: an https issuer is never reached over http again.
    if (ctx.secure) ctx.set('Strict-Transport-Security', 'max-age=31536000; includeSubDomains');
    return next().then(() => {
      if (isNoStore(ctx.response.get('Cache-Control'))) noStore(ctx);
    });
  };
}

const DEFAULT_POLICY = "default-src 'none'; script-src 'none'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";
/**
 * The authorization endpoint may answer with the engine's response_mode=form_post page: one
 * inline script, whose hash the engine adds to script-src, submitting a form to the client.
 * The logout endpoint answers a browser that is not signed in with the same kind of page,
 * submitting to its own confirm URL, which may redirect to the client's post_logout_redirect_uri.
 * Such a page is rendered again in the product's layout, under a policy of its own
 * (engine_auto_post.ts); this one is for a page of the engine's that does not read as it expects.
 * No script is ever served from 'self'; it is there so the directive exists for the hash.
 */
const FORM_POST_POLICY = "default-src 'none'; script-src 'self'; form-action *; frame-ancestors 'none'; base-uri 'none'";
