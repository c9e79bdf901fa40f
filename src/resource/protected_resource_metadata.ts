import type { Middleware } from 'koa';

import { HttpError } from '../shared/http_error.ts';
import { DATA_API_SCOPE } from './authenticate.ts';
import type { DpopChallenge } from './bearer.ts';
import { bearerCors } from './cors.ts';

const WELL_KNOWN = '/.well-known/oauth-protected-resource';

/** A resource served here, as its metadata describes it. */
export interface ServedResource {
  /** Its identifier: the tokens' `aud`. */
  resource: string;
  name: string;
}

export interface ResourceMetadata {
  /** The paths the metadata is served at. */
  paths: Set<string>;
  /** Each resource's metadata URL, for its 401 challenge (RFC 9728 section 5.1). */
  metadataUrlOf(resource: string): string;
  middleware: Middleware;
}

/**
 * RFC 9728 protected resource metadata for the resources served here (the data API,
 * `{issuer}/rest`, and the MCP endpoint, `{issuer}/mcp`), so a client that starts from an API URL
 * (MCP clients do) finds the authorization server. Each is served at its well-known URL (the
 * resource path appended); the bare well-known URL, which clients try when the first is not found,
 * describes the first (the data API). Each says whether it takes plain bearer tokens or DPoP-bound ones only.
 */
export function protectedResourceMetadata(issuer: string, served: readonly ServedResource[], dpop: DpopChallenge): ResourceMetadata {
  const issuerPath = new URL(issuer).pathname.replace(/\/$/, '');
  // Each path: its document, and the route it is counted under (relative to the issuer, as every route).
  const byPath = new Map<string, { route: string; document: Record<string, unknown> }>();
  const urls = new Map<string, string>();
  for (const { resource, name } of served) {
    const { origin, pathname } = new URL(resource);
    const document = {
      resource,
      authorization_servers: [issuer],
      scopes_supported: [DATA_API_SCOPE],
      bearer_methods_supported: ['header'],
      resource_name: name,
      // RFC 9728 section 2: the algorithms its DPoP proofs may use, and whether plain bearer tokens are refused.
      dpop_signing_alg_values_supported: dpop.algorithms,
      dpop_bound_access_tokens_required: !dpop.bearerAccepted,
    };
    byPath.set(`${WELL_KNOWN}${pathname}`, { route: `${WELL_KNOWN}${pathname.slice(issuerPath.length)}`, document });
    urls.set(resource, `${origin}${WELL_KNOWN}${pathname}`);
    if (!byPath.has(WELL_KNOWN)) byPath.set(WELL_KNOWN, { route: WELL_KNOWN, document });
  }
  const methods = 'GET, HEAD';
  // An MCP client sends its protocol version on its discovery requests too (the MCP SDK's do): a
  // browser-based host's preflight for them has to allow the header.
  const cors = bearerCors(methods, ['Mcp-Protocol-Version']);
  return {
    paths: new Set(byPath.keys()),
    metadataUrlOf: (resource) => urls.get(resource)!,
    middleware: (ctx) => {
      const served = byPath.get(ctx.path)!;
      ctx.state.route = served.route;
      return cors(ctx, async () => {
        if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
          throw new HttpError(405, 'method_not_allowed', 'the metadata is read with GET', { Allow: methods });
        }
        ctx.set('Cache-Control', 'public, max-age=300');
        ctx.body = served.document;
      });
    },
  };
}
