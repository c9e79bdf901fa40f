import type { Middleware } from 'koa';

/**
 * RFC 8414 metadata. The engine publishes OpenID Connect discovery at
 * `{issuer}/.well-known/openid-configuration`; the same document answers the RFC 8414 well-known
 * URI, both in its standard path form (`/.well-known/oauth-authorization-server{issuer path}`)
 * and in the suffix form many clients try first.
 */
export function authorizationServerMetadata(basePath: string): Middleware {
  const openidConfiguration = `${basePath}/.well-known/openid-configuration`;
  const aliases = new Set([
    `/.well-known/oauth-authorization-server${basePath}`,
    `${basePath}/.well-known/oauth-authorization-server`,
  ]);
  if (basePath) aliases.add(`/.well-known/openid-configuration${basePath}`);
  return async (ctx, next) => {
    if (aliases.has(ctx.path)) ctx.path = openidConfiguration;
    await next();
  };
}
