import type { Context } from 'koa';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';

import type { Metrics } from './metrics.ts';

interface EngineError {
  error?: string;
}

/**
 * What only the engine knows: a token issued, with its grant type (`grant.success`, also for the
 * host's client_credentials handler, which the engine calls), and the error an authorization
 * request ended with, which reaches the client in a redirect or a page rather than a JSON body
 * (kept on the request for requests.ts to count once, with the answer).
 */
export function countEngineEvents(provider: Provider, metrics: Metrics): void {
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => metrics.tokenIssued(ctx.oidc.params?.grant_type));
  provider.on('authorization.error', (ctx: KoaContextWithOIDC, error: EngineError) => {
    // The last one is the one answered (a bad redirect_uri replaces the error found first).
    if (typeof error.error === 'string') (ctx.state as { oauthErrorCode?: string }).oauthErrorCode = error.error;
  });
}

/** The error the authorization endpoint answered this request with, if any. */
export function oauthErrorOf(ctx: Context): string | undefined {
  return (ctx.state as { oauthErrorCode?: string }).oauthErrorCode;
}
