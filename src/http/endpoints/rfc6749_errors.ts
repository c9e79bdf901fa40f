import type { Context, Middleware } from 'koa';

import { oidcOf } from '../../engine/context.ts';

interface ErrorBody {
  error?: string;
  error_description?: string;
}

/**
 * Where the engine's error code differs from RFC 6749 section 5.2, the host corrects it on the
 * endpoints that authenticate clients (token, introspection, revocation):
 * - no client authentication at all is `invalid_client` (401), not `invalid_request`;
 * - a grant type the client is not registered for is `unauthorized_client`, not `invalid_request`.
 */
export const rfc6749ErrorCodes: Middleware = async (ctx, next) => {
  await next();
  const body = ctx.body as ErrorBody | undefined;
  if (ctx.status !== 400 || body?.error !== 'invalid_request') return;
  const oidc = oidcOf(ctx);
  if (!oidc?.client && body.error_description === 'no client authentication mechanism provided') {
    answerMissingClientAuthentication(ctx, body);
    return;
  }
  const grantType = oidc?.params?.grant_type;
  if (oidc?.client && typeof grantType === 'string' && !oidc.client.grantTypeAllowed(grantType)) {
    body.error = 'unauthorized_client';
    body.error_description = grantType === 'client_credentials'
      ? 'this client is not registered for client_credentials; only clients bound to a workspace (registered with a workspace admin\'s initial access token) may use it'
      : `this client is not registered for the ${grantType} grant type`;
  }
};

function answerMissingClientAuthentication(ctx: Context, body: ErrorBody): void {
  ctx.status = 401;
  ctx.set('WWW-Authenticate', 'Basic realm="oauth"');
  body.error = 'invalid_client';
  body.error_description = 'client authentication is required: send client_id and client_secret (client_secret_post or client_secret_basic), or client_id alone for a public client';
}
