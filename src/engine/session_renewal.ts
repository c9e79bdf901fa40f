import type { Context } from 'koa';
import type { Provider } from 'oidc-provider';
import instance from 'oidc-provider/lib/helpers/weak_cache.js';

import { nowSeconds } from '../shared/clock.ts';

/**
 * Gives the browser's signed-in session a new id, as the engine does at a sign-in, keeping
 * everything else about it (who, since when, until when): the old id, and so any copy of the
 * session cookie, signs no one in any more. For a page of the host (the settings area's password
 * change), outside the engine's routes, whose own session step would do this there. False when
 * the browser's session was gone already.
 */
export async function renewSessionId(provider: Provider, ctx: Context): Promise<boolean> {
  const session = await provider.Session.get(ctx);
  // None to renew: a request sent with the same cookie renewed it first (a form sent twice).
  if (!session.accountId || typeof session.exp !== 'number') return false;
  session.resetIdentifier();
  // Saving under the new id removes the record under the old one.
  await session.save(Math.max(1, session.exp - nowSeconds()));
  const { long } = instance(provider).configuration.cookies;
  const { cookies } = provider.createContext(ctx.req, ctx.res);
  // As the engine's own session step: a request that came over https (through a trusted proxy) may set a Secure cookie.
  cookies.secure = cookies.secure || ctx.secure;
  cookies.set(provider.cookieName('session'), session.jti, { ...long, expires: new Date(session.exp * 1000) });
  return true;
}

/**
 * The session id the browser's session cookie names, read (and its signature checked) as the
 * engine reads it, whether or not that session still exists.
 */
export function sessionIdInCookie(provider: Provider, ctx: Context): string | undefined {
  const { long } = instance(provider).configuration.cookies;
  const { cookies } = provider.createContext(ctx.req, ctx.res);
  const name = provider.cookieName('session');
  return (long.signed === undefined ? cookies.get(name) : cookies.get(name, { signed: long.signed })) || undefined;
}
