import type { Context } from 'koa';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';

/** The engine's error for an authorization request (its `authorization.error` event). */
export interface AuthorizationError {
  error?: string;
  error_description?: string;
}

/**
 * Keeps the error an authorization request ended with on the request, for what only sees the
 * answer afterwards: the redirect policy for unvetted clients (src/http/endpoints/authorization.ts)
 * and the metrics. The last one is the one answered (a bad redirect_uri replaces the error found first).
 */
export function recordAuthorizationErrors(provider: Provider): void {
  provider.on('authorization.error', (ctx: KoaContextWithOIDC, error: AuthorizationError) => {
    ctx.state.authorizationError = error;
  });
}

export function authorizationErrorOf(ctx: Context): AuthorizationError | undefined {
  return ctx.state.authorizationError;
}
