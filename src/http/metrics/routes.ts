import type { RouterContext } from '@koa/router';
import type { Context } from 'koa';

import { oidcOf } from '../../engine/context.ts';
import { ENGINE_ROUTE_TEMPLATES } from '../../engine/routes.ts';

/** What a request no route answered is counted as: a scanner's guesses must not each make a series. */
export const OTHER_ROUTE = 'other';

/**
 * The route template a request is counted under (`/oauth/register/:clientId`), relative to the
 * issuer: the one named by what answered it, so the label never holds an id and never drifts from
 * the routes. In order: what the host set where no router is involved (`ctx.state.route`: probes,
 * metrics, discovery's aliases, the resource metadata), the route a router matched (@koa/router's
 * `_matchedRoute`: the host's routes, the pages, the data API), the engine's route (`ctx.oidc.route`).
 */
export function routeTemplates(basePath: string): (ctx: Context) => string {
  return (ctx) => {
    if (ctx.state.route !== undefined) return ctx.state.route;
    const matched = matchedRoute(ctx);
    if (matched !== undefined) return matched.startsWith(basePath) ? matched.slice(basePath.length) || '/' : matched;
    const engineRoute = oidcOf(ctx)?.route;
    return (engineRoute && ENGINE_ROUTE_TEMPLATES[engineRoute]) ?? OTHER_ROUTE;
  };
}

/**
 * The route a router matched for the request: the first of its routes for the path and method,
 * the one that answers it, whether or not the request got as far as it. A request its middleware
 * refused first (the data API's authentication, its rate limit) is counted under the route it was
 * for, not under that middleware's path pattern.
 */
function matchedRoute(ctx: Context): string | undefined {
  const layers = (ctx as Partial<Pick<RouterContext, 'matched'>>).matched ?? [];
  const route = layers.find((layer) => layer.methods.includes(ctx.method))?.path;
  return typeof route === 'string' ? route : undefined;
}
