import type { Context, Middleware } from 'koa';

import { noStore } from '../shared/no_store.ts';
import { requestedHost } from '../shared/requested_host.ts';

/**
 * A page (a browser's GET or HEAD of `pagePaths`) asked for under another name than BASE_URL's is
 * answered with 302 to the same path and query at BASE_URL, before any form is shown: a browser
 * at `http://127.0.0.1:3000` for a `http://localhost:3000` issuer would otherwise sign in there
 * and then be refused its next step (the pages' `form-action` and the session cookie belong to
 * BASE_URL's host). APIs are answered at whatever host they are reached by (pinned_origin.ts).
 *
 * The name the browser used is the `Host` header, or with TRUST_PROXY the proxy's
 * `X-Forwarded-Host` when it sends one. Only a name for BASE_URL's own port is redirected: a
 * `Host` with another port is what a proxy in front names the service by (`127.0.0.1:3000`
 * behind an https BASE_URL), and redirecting it would send the browser round in a loop.
 * Temporary (302): BASE_URL may change, and a browser must not keep the redirect.
 */
export function pagesAtIssuerHost(issuer: string, trustProxy: boolean, isPage: (path: string) => boolean): Middleware {
  const { origin, protocol, hostname, port } = new URL(issuer);
  return (ctx, next) => {
    if ((ctx.method !== 'GET' && ctx.method !== 'HEAD') || !isPage(ctx.path)) return next();
    const requested = requestedUrl(ctx, trustProxy, protocol);
    if (!requested || requested.hostname === hostname || requested.port !== port) return next();
    noStore(ctx);
    ctx.status = 302;
    ctx.redirect(`${origin}${ctx.path}${ctx.search}`);
  };
}

/**
 * The host the browser asked for, as a URL of the issuer's scheme (so a port left out is that
 * scheme's), from the raw headers: `ctx.host` is pinned to the issuer's. Undefined when no header
 * names one that parses.
 */
function requestedUrl(ctx: Context, trustProxy: boolean, protocol: string): URL | undefined {
  const host = requestedHost(ctx, trustProxy);
  if (!host) return undefined;
  const url = URL.parse(`${protocol}//${host}`);
  return url && url.pathname === '/' && !url.username && !url.password ? url : undefined;
}
