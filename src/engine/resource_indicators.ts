import { errors, type KoaContextWithOIDC, type ResourceServer } from 'oidc-provider';

import { LIFETIMES } from '../../config/lifetimes.ts';
import { SUPPORTED_SCOPES } from './scopes.ts';

/** The data APIs (Core under /rest/, Metadata under /rest/metadata/) are one protected resource. */
export function apiAudience(issuer: string): string {
  return `${issuer}/rest`;
}

/** Access tokens for the data APIs: RFC 9068 JWTs signed with ES256, one hour. */
export function dataApiResourceServer(audience: string): ResourceServer {
  return {
    scope: SUPPORTED_SCOPES.join(' '),
    audience,
    accessTokenTTL: LIFETIMES.AccessToken,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'ES256' } },
  };
}

/** `features.resourceIndicators`: every access token is for the data APIs, whether or not the client names them. */
export function resourceIndicators(audience: string) {
  const info = dataApiResourceServer(audience);
  return {
    enabled: true,
    defaultResource: () => audience,
    useGrantedResource: () => true,
    getResourceServerInfo: (_ctx: KoaContextWithOIDC, resource: string) => {
      if (resource !== audience) throw new errors.InvalidTarget(`unknown resource; this server issues tokens for ${audience} only`);
      return info;
    },
  };
}
