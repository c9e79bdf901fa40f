import type { Middleware } from 'koa';

const OPENID_CONFIGURATION = '/.well-known/openid-configuration';
const OAUTH_AUTHORIZATION_SERVER = '/.well-known/oauth-authorization-server';

/**
 * RFC 8414 metadata. The engine publishes OpenID Connect discovery at
 * `{issuer}/.well-known/openid-configuration`; the same document answers the RFC 8414 well-known
 * URI, both in its standard path form (`/.well-known/oauth-authorization-server{issuer path}`)
 * and in the suffix form many clients try first. Each alias is counted under its own name.
 */
export function authorizationServerMetadata(basePath: string): Middleware {
  const openidConfiguration = `${basePath}${OPENID_CONFIGURATION}`;
  const aliases = new Map([
    [`${OAUTH_AUTHORIZATION_SERVER}${basePath}`, OAUTH_AUTHORIZATION_SERVER],
    [`${basePath}${OAUTH_AUTHORIZATION_SERVER}`, OAUTH_AUTHORIZATION_SERVER],
  ]);
  if (basePath) aliases.set(`${OPENID_CONFIGURATION}${basePath}`, OPENID_CONFIGURATION);
  return (ctx, next) => {
    const alias = aliases.get(ctx.path);
    if (alias !== undefined) {
      ctx.state.route = alias;
      ctx.path = openidConfiguration;
    }
    return next();
  };
}
