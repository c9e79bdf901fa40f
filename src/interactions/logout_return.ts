import type { Context, Middleware } from 'koa';
import type { Client, Provider } from 'oidc-provider';

import { isVetted } from '../clients/vetting.ts';
import { clientDisplay, redirectTarget } from '../pages/client_display.ts';

/**
 * OpenID Connect RP-Initiated Logout 1.0 section 3: without an ID Token for the client
 * (`id_token_hint`) the OP must not redirect after sign-out unless it has other means of confirming
 * the target is legitimate. Anyone may register a client with `post_logout_redirect_uris` of their
 * choosing, so `client_id` alone confirms nothing: this server's own link would carry people to
 * any site, with no question when the browser has no session. So the redirect is kept for a valid
 * `id_token_hint` (the engine checks it was issued to that client) and for clients an operator
 * vetted; for any other the engine is not told the target, and the page that ends the sign-out
 * offers a plainly labelled link to it instead, which the user may follow or not.
 *
 * The target is carried from the logout request to that page in a signed cookie scoped to the
 * logout endpoint, and checked again against the client's registration when the page is shown.
 */
const COOKIE = 'logout_return';
const MAX_AGE_MS = 10 * 60 * 1000;

/** A sign-out's way back to an application that was not sent there by itself. */
export interface LogoutReturn {
  /** The application, as the pages name it. */
  clientName: string;
  /** Where the link goes: the registered post_logout_redirect_uri with `state`. */
  href: string;
  /** What the link names: the host, or the app's scheme. */
  label: string;
}

interface HeldTarget {
  clientId: string;
  uri: string;
  state?: string;
}

/**
 * Before the engine's logout endpoint (GET): a `post_logout_redirect_uri` that a valid
 * `id_token_hint` does not vouch for, of a client no operator vetted, is taken out of the request
 * and kept for the signed-out page. A target the client did not register is left in: the engine
 * refuses it on its error page.
 */
export function holdUnconfirmedLogoutReturn(provider: Provider, cookiePath: string): Middleware {
  return async (ctx, next) => {
    const { client_id: clientId, post_logout_redirect_uri: uri, id_token_hint: hint, state } = ctx.query;
    // The engine reads an empty parameter as an absent one: an empty hint vouches for nothing.
    if ((hint !== undefined && hint !== '') || typeof clientId !== 'string' || typeof uri !== 'string' || (state !== undefined && typeof state !== 'string')) return next();
    const client = await findClient(provider, clientId);
    if (!client || isVetted(client) || !client.postLogoutRedirectUriAllowed(uri)) return next();
    const query = new URLSearchParams(ctx.querystring);
    query.delete('post_logout_redirect_uri');
    query.delete('state');
    ctx.querystring = query.toString();
    const held: HeldTarget = state === undefined ? { clientId, uri } : { clientId, uri, state };
    ctx.cookies.set(COOKIE, Buffer.from(JSON.stringify(held)).toString('base64url'), cookieOptions(cookiePath, MAX_AGE_MS));
    ctx.state.heldLogoutReturn = logoutReturn(client, held);
    await next();
  };
}

/** The held way back for the page the sign-out ends on, forgotten once read; undefined when there is none. */
export async function takeLogoutReturn(ctx: Context, provider: Provider, cookiePath: string): Promise<LogoutReturn | undefined> {
  const value = ctx.cookies.get(COOKIE, { signed: true });
  if (!value) return undefined;
  ctx.cookies.set(COOKIE, null, cookieOptions(cookiePath, 0));
  const held = parse(value);
  const client = held && await findClient(provider, held.clientId);
  // Registered still: a client may have changed its URIs, or been deleted, since.
  return client && client.postLogoutRedirectUriAllowed(held.uri) ? logoutReturn(client, held) : undefined;
}

function logoutReturn(client: Client, { clientId, uri, state }: HeldTarget): LogoutReturn {
  const href = new URL(uri);
  if (state !== undefined) href.searchParams.set('state', state);
  return { clientName: clientDisplay(clientId, client).name, href: href.href, label: redirectTarget(uri).label };
}

async function findClient(provider: Provider, clientId: string): Promise<Client | undefined> {
  try {
    return await provider.Client.find(clientId);
  } catch {
    // An unknown or invalid client: the engine answers the request with its own error.
    return undefined;
  }
}

function parse(value: string): HeldTarget | undefined {
  try {
    const held = JSON.parse(Buffer.from(value, 'base64url').toString()) as Partial<HeldTarget>;
    if (typeof held.clientId !== 'string' || typeof held.uri !== 'string' || (held.state !== undefined && typeof held.state !== 'string')) return undefined;
    return held.state === undefined ? { clientId: held.clientId, uri: held.uri } : { clientId: held.clientId, uri: held.uri, state: held.state };
  } catch {
    return undefined;
  }
}

function cookieOptions(path: string, maxAge: number) {
  return { signed: true, httpOnly: true, sameSite: 'lax' as const, path, maxAge, overwrite: true };
}
