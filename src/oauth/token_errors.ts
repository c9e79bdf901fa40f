import type { Middleware } from 'koa';
import type { KoaContextWithOIDC } from 'oidc-provider';

/**
 * RFC 6749 section 5.2: a client using a grant type it is not registered for gets
 * `unauthorized_client`; the engine answers `invalid_request`, so the host corrects the code.
 */
export const unauthorizedClientForGrantType: Middleware = async (ctx, next) => {
  await next();
  const body = ctx.body as { error?: string; error_description?: string } | undefined;
  if (ctx.status !== 400 || body?.error !== 'invalid_request') return;
  const { oidc } = ctx as unknown as Partial<KoaContextWithOIDC>;
  const grantType = oidc?.params?.grant_type;
  if (oidc?.client && typeof grantType === 'string' && !oidc.client.grantTypeAllowed(grantType)) {
    body.error = 'unauthorized_client';
    body.error_description = grantType === 'client_credentials'
      ? 'this client is not registered for client_credentials; only clients bound to a workspace (registered with a workspace admin\'s initial access token) may use it'
      : `this client is not registered for the ${grantType} grant type`;
  }
};
