import { errors, type Client, type KoaContextWithOIDC, type ResourceServer } from 'oidc-provider';

import { LIFETIMES } from '../../config/lifetimes.ts';
import type { ProtectedResource, ProtectedResources } from '../clients/protected_resources.ts';
import { SUPPORTED_SCOPES } from './scopes.ts';

/** The data APIs (Core under /rest/, Metadata under /rest/metadata/) are one protected resource: the default one. */
export function apiAudience(issuer: string): string {
  return `${issuer}/rest`;
}

/** The MCP endpoint serving the workspace data: a protected resource of its own. */
export function mcpAudience(issuer: string): string {
  return `${issuer}/mcp`;
}

/** The APIs this service serves itself; operators register others (src/clients/protected_resources.ts). With `dpopRequired` (DPOP_REQUIRED), their tokens are DPoP-bound only. */
export function builtInResources(issuer: string, dpopRequired: boolean): ProtectedResource[] {
  return [
    { resource: apiAudience(issuer), name: 'the workspace data API (Core and Metadata)', scopes: SUPPORTED_SCOPES, builtIn: true, dpopRequired },
    { resource: mcpAudience(issuer), name: 'the workspace data over MCP', scopes: ['api'], builtIn: true, dpopRequired },
  ];
}

/**
 * A token for an API that takes DPoP-bound tokens only is issued only with a DPoP proof (which the
 * engine then verifies and binds the token to): without one, the client is told why, before
 * anything is issued.
 */
export function assertProofFor(api: ProtectedResource, hasProof: boolean): void {
  if (api.dpopRequired && !hasProof) throw new errors.InvalidDpopProof(proofRequired(api));
}

/** The words every refusal of a token request without the proof its API requires uses. */
export function proofRequired(api: ProtectedResource): string {
  return `${api.resource} accepts DPoP-bound access tokens only: send a DPoP proof (RFC 9449) with the token request`;
}

/** The API a code or refresh token gets a token for when the request names none: the data API if its grant has it, else the grant's first (the engine asks defaultResource). */
export function grantedDefault(granted: readonly string[], defaultResource: string): string | undefined {
  return granted.includes(defaultResource) ? defaultResource : granted[0];
}

/** Access tokens for an API: RFC 9068 JWTs signed with ES256, one hour, with the scopes it accepts. */
export function resourceServerInfo({ resource, scopes }: ProtectedResource): ResourceServer {
  return {
    scope: scopes.join(' '),
    audience: resource,
    accessTokenTTL: LIFETIMES.AccessToken,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'ES256' } },
  };
}

/**
 * `features.resourceIndicators` (RFC 8707): a request that names no resource gets a token for the
 * data API; one that names an API this server issues tokens for gets a token for that API, with
 * only the scopes it accepts; any other is refused with `invalid_target`. A refresh token or code
 * gets tokens for the APIs of its grant only (the engine checks it, RFC 8707 section 2.2), and for
 * the one it was issued for when the request names none.
 */
export function resourceIndicators(resources: ProtectedResources, defaultResource: string) {
  return {
    enabled: true,
    defaultResource: (_ctx: KoaContextWithOIDC, _client: Client, oneOf?: readonly string[]) => {
      if (!oneOf) return defaultResource;
      return grantedDefault(oneOf, defaultResource) ?? defaultResource;
    },
    useGrantedResource: () => true,
    getResourceServerInfo: async (ctx: KoaContextWithOIDC, resource: string) => {
      const found = await resources.find(resource);
      if (!found) throw new errors.InvalidTarget(unknownResource(resource));
      if (ctx.oidc.route === 'token') assertProofFor(found, Boolean(ctx.get('DPoP')));
      return resourceServerInfo(found);
    },
  };
}

/** The words every refusal of an unknown resource uses. */
export function unknownResource(resource: string): string {
  return `unknown resource ${resource.slice(0, 200)}; this server issues tokens for the APIs its operator registered`;
}
