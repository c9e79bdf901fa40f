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
    const matched = (ctx as { _matchedRoute?: unknown })._matchedRoute;
    if (typeof matched === 'string') return matched.startsWith(basePath) ? matched.slice(basePath.length) || '/' : matched;
    const engineRoute = oidcOf(ctx)?.route;
    return (engineRoute && ENGINE_ROUTE_TEMPLATES[engineRoute]) ?? OTHER_ROUTE;
  };
}
