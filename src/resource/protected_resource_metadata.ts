import type { Middleware } from 'koa';

import { HttpError } from '../shared/http_error.ts';
import { DATA_API_SCOPE } from './authenticate.ts';
import { bearerCors } from './cors.ts';

const WELL_KNOWN = '/.well-known/oauth-protected-resource';

/**
 * RFC 9728 protected resource metadata for the data API (`{issuer}/rest`), so a client that
 * starts from an API URL (MCP clients do) finds the authorization server. Served at the
 * resource's well-known URL (the resource path appended) and at the bare well-known URL, which
 * clients try when the first is not found.
 */
export function protectedResourceMetadata(issuer: string, resource: string): { paths: Set<string>; metadataUrl: string; middleware: Middleware } {
  const { origin, pathname: resourcePath } = new URL(resource);
  const metadataUrl = `${origin}${WELL_KNOWN}${resourcePath}`;
  const issuerPath = new URL(issuer).pathname.replace(/\/$/, '');
  // Each path, with the route it is counted under (relative to the issuer, as every route).
  const routes = new Map([[`${WELL_KNOWN}${resourcePath}`, `${WELL_KNOWN}${resourcePath.slice(issuerPath.length)}`], [WELL_KNOWN, WELL_KNOWN]]);
  const paths = new Set(routes.keys());
  const document = {
    resource,
    authorization_servers: [issuer],
    scopes_supported: [DATA_API_SCOPE],
    bearer_methods_supported: ['header'],
    resource_name: 'Workspace data API (Core and Metadata)',
  };
  const cors = bearerCors('GET');
  return {
    paths,
    metadataUrl,
    middleware: (ctx) => {
      ctx.state.route = routes.get(ctx.path);
      return cors(ctx, async () => {
        if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
          throw new HttpError(405, 'method_not_allowed', 'the metadata is read with GET', { Allow: 'GET, HEAD' });
        }
        ctx.set('Cache-Control', 'public, max-age=300');
        ctx.body = document;
      });
    },
  };
}
