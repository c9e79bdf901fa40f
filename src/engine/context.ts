import type { Context } from 'koa';
import type { KoaContextWithOIDC } from 'oidc-provider';

/**
 * The engine's view of a request (`ctx.oidc`: the client, the parameters it resolved, the grant),
 * for the host's middleware around an engine endpoint; undefined where the engine has not run
 * (or did not get as far as making one).
 */
export function oidcOf(ctx: Context): KoaContextWithOIDC['oidc'] | undefined {
  return (ctx as Partial<KoaContextWithOIDC>).oidc;
}
