import type { Context, Middleware } from 'koa';

import type { ServiceIdentity } from '../../config/index.ts';
import { SETTINGS_PATH } from '../clients/first_party.ts';
import { cspOrigin } from './csp.ts';

/** What every page shows of the service (the layout's header), and where the service's own pages are. */
export interface Site {
  /** SERVICE_NAME. */
  name: string;
  /** SERVICE_LOGO_URL as an absolute URL, and the origin the pages' policy opens `img-src` to for it. */
  logo: { src: string; origin: string } | undefined;
  /** The home page, as a path: `{basePath}/`. */
  home: string;
  /** The settings area, as a path. */
  settings: string;
  documentationUrl: string | undefined;
}

export function siteOf(service: ServiceIdentity, issuer: string): Site {
  const { origin, pathname } = new URL(issuer);
  const basePath = pathname.replace(/\/$/, '');
  return {
    name: service.name,
    logo: service.logoUrl === undefined ? undefined : logoOf(new URL(service.logoUrl, origin)),
    home: `${basePath}/`,
    settings: `${basePath}${SETTINGS_PATH}`,
    documentationUrl: service.documentationUrl,
  };
}

/** The configuration checked the URL (config/parsers.ts, imageUrl); a host no policy could name is refused here all the same. */
function logoOf(url: URL): Site['logo'] {
  const origin = cspOrigin(url);
  if (!origin) throw new Error(`SERVICE_LOGO_URL names a host a Content-Security-Policy cannot: ${url.host}`);
  return { src: url.href, origin };
}

/** Puts the site on every request, for the pages (the layout reads `site`) and the error page. */
export function describeSite(site: Site): Middleware {
  return (ctx, next) => {
    ctx.state.site = site;
    return next();
  };
}

export function siteOfRequest(ctx: Context): Site {
  const { site } = ctx.state;
  if (!site) throw new Error('a page was rendered before describeSite ran');
  return site;
}
