import type { Context } from 'koa';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';

import { authorizationErrorOf } from '../../engine/authorization_errors.ts';
import type { Metrics } from './metrics.ts';

/**
 * What only the engine knows: a token issued, with its grant type (`grant.success`, also for the
 * host's client_credentials handler, which the engine calls).
 */
export function countEngineEvents(provider: Provider, metrics: Metrics): void {
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => metrics.tokenIssued(ctx.oidc.params?.grant_type));
}

/**
 * The error the authorization endpoint answered this request with, if any: it reaches the client
 * in a redirect or a page rather than a JSON body (recorded by src/engine/authorization_errors.ts).
 */
export function oauthErrorOf(ctx: Context): string | undefined {
  const code = authorizationErrorOf(ctx)?.error;
  return typeof code === 'string' ? code : undefined;
}
