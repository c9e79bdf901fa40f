import type { Middleware } from 'koa';

import { renderPage } from '../pages/render.ts';
import type { Site } from '../pages/site.ts';

/**
 * The home page, `{issuer}/` (and `{issuer}` under a path): what the service is, the way into the
 * settings area, and for developers the issuer, its discovery documents and the documentation
 * (SERVICE_DOCUMENTATION_URL) when there is some.
 */
export function homePage(site: Site, issuer: string): Middleware {
  const { origin, pathname } = new URL(issuer);
  const basePath = pathname.replace(/\/$/, '');
  const isHome = atHomePage(site);
  const data = {
    issuer,
    settings: site.settings,
    // RFC 8414 section 3: the well-known segment goes before the issuer's path.
    authorizationServerMetadata: `${origin}/.well-known/oauth-authorization-server${basePath}`,
    openidConfiguration: `${issuer}/.well-known/openid-configuration`,
    documentationUrl: site.documentationUrl,
  };
  return (ctx, next) => {
    if (!isHome(ctx.path) || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    ctx.state.route = '/';
    return renderPage(ctx, 'home', site.name, data);
  };
}

/** The home page's paths: `{basePath}/`, and `{basePath}` itself when the issuer has a path. */
export function atHomePage(site: Site): (path: string) => boolean {
  const paths = new Set([site.home, site.home.slice(0, -1)].filter(Boolean));
  return (path) => paths.has(path);
}
