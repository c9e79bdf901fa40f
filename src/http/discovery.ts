import type { Middleware } from 'koa';

import { FAPI_SIGNING_ALGORITHMS } from '../clients/fapi.ts';
import { DISCOVERY_PATH as OPENID_CONFIGURATION, OAUTH_DISCOVERY_PATH as OAUTH_AUTHORIZATION_SERVER } from '../engine/routes.ts';

/**
 * RFC 8414 metadata. The engine publishes OpenID Connect discovery at
 * `{issuer}/.well-known/openid-configuration`; the same document answers the RFC 8414 well-known
 * URI, both in its standard path form (`/.well-known/oauth-authorization-server{issuer path}`)
 * and in the suffix form many clients try first. Each alias is counted under its own name.
 */
export function authorizationServerMetadata(basePath: string, fapi: boolean): Middleware {
  const openidConfiguration = `${basePath}${OPENID_CONFIGURATION}`;
  const aliases = new Map([
    [`${OAUTH_AUTHORIZATION_SERVER}${basePath}`, OAUTH_AUTHORIZATION_SERVER],
    [`${basePath}${OAUTH_AUTHORIZATION_SERVER}`, OAUTH_AUTHORIZATION_SERVER],
  ]);
  if (basePath) aliases.set(`${OPENID_CONFIGURATION}${basePath}`, OPENID_CONFIGURATION);
  return async (ctx, next) => {
    const alias = aliases.get(ctx.path);
    if (alias !== undefined) {
      ctx.state.route = alias;
      ctx.path = openidConfiguration;
    }
    await next();
    if (fapi && ctx.path === openidConfiguration && ctx.status === 200) onlyWhatFapiClientsUse(ctx.body as Record<string, unknown>);
  };
}

/**
 * With FAPI=on every client that obtains tokens authenticates with private_key_jwt and is signed
 * for with the profile's algorithms (src/clients/fapi.ts), so the token and revocation endpoints'
 * methods, and the algorithms (request objects' too), are those alone (RFC 8414 section 2: what "this token endpoint"
 * supports). The engine lists every method it has, which the settings area's own client (no token
 * ever) and the operator's resource servers at introspection (no grant type, so not FAPI clients)
 * still use: introspection's lists are left as they are.
 */
function onlyWhatFapiClientsUse(metadata: Record<string, unknown>): void {
  for (const endpoint of ['token_endpoint', 'revocation_endpoint']) {
    metadata[`${endpoint}_auth_methods_supported`] = ['private_key_jwt'];
    keepFapiAlgorithms(metadata, `${endpoint}_auth_signing_alg_values_supported`);
  }
  keepFapiAlgorithms(metadata, 'id_token_signing_alg_values_supported');
  keepFapiAlgorithms(metadata, 'userinfo_signing_alg_values_supported');
  keepFapiAlgorithms(metadata, 'request_object_signing_alg_values_supported');
}

function keepFapiAlgorithms(metadata: Record<string, unknown>, field: string): void {
  const listed = metadata[field];
  if (Array.isArray(listed)) metadata[field] = listed.filter((algorithm) => FAPI_SIGNING_ALGORITHMS.includes(String(algorithm)));
}
