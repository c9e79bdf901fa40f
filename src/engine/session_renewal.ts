import type { Context } from 'koa';
import type { Provider } from 'oidc-provider';
import instance from 'oidc-provider/lib/helpers/weak_cache.js';

import { nowSeconds } from '../shared/clock.ts';

/**
 * Gives the browser's signed-in session a new id, as the engine does at a sign-in, keeping
 * everything else about it (who, since when, until when): the old id, and so any copy of the
 * session cookie, signs no one in any more. For a page of the host (the settings area's password
 * change), outside the engine's routes, whose own session step would do this there.
 */
export async function renewSessionId(provider: Provider, ctx: Context): Promise<void> {
  const session = await provider.Session.get(ctx);
  if (!session.accountId || typeof session.exp !== 'number') return;
  session.resetIdentifier();
  // Saving under the new id removes the record under the old one.
  await session.save(Math.max(1, session.exp - nowSeconds()));
  const { long } = instance(provider).configuration.cookies;
  const { cookies } = provider.createContext(ctx.req, ctx.res);
  // As the engine's own session step: a request that came over https (through a trusted proxy) may set a Secure cookie.
  cookies.secure = cookies.secure || ctx.secure;
  cookies.set(provider.cookieName('session'), session.jti, { ...long, expires: new Date(session.exp * 1000) });
}
