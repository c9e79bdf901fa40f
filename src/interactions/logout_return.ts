import type { Context, Middleware } from 'koa';
import type { Client, KoaContextWithOIDC, Provider } from 'oidc-provider';

import { isVetted } from '../clients/vetting.ts';
import { clientOfRequest } from '../engine/clients_per_request.ts';
import { oidcOf } from '../engine/context.ts';
import { clientDisplay, redirectTarget } from '../pages/client_display.ts';
import { digest } from '../shared/digest.ts';

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
 * It is the way back of that one sign-out only: a logout request that holds nothing forgets it,
 * and it is bound to the confirmation form the engine made for the request that held it (its
 * xsrf value), so the page shows it only after the engine accepted that very form. A link planted
 * by a request the user left unanswered is never shown at the end of another sign-out.
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

interface Target {
  clientId: string;
  uri: string;
  state?: string;
}

interface HeldTarget extends Target {
  /** The digest of the xsrf value of the engine's confirmation form for the request that held it. */
  signOut: string;
  /** Whether the engine accepted that form: only then does the page the sign-out ends on offer it. */
  confirmed: boolean;
}

/**
 * Before the engine's logout endpoint (GET): a `post_logout_redirect_uri` that a valid
 * `id_token_hint` does not vouch for, of a client no operator vetted, is taken out of the request
 * and kept for the signed-out page, bound to the confirmation form the engine makes for this
 * request. A target the client did not register is left in: the engine refuses it on its error
 * page. A request that holds nothing forgets what an earlier one held.
 */
export function holdUnconfirmedLogoutReturn(provider: Provider, cookiePath: string): Middleware {
  return async (ctx, next) => {
    const found = await unconfirmedTarget(ctx, provider);
    if (!found) {
      forget(ctx, cookiePath);
      return next();
    }
    const { client, target } = found;
    const query = new URLSearchParams(ctx.querystring);
    query.delete('post_logout_redirect_uri');
    query.delete('state');
    ctx.querystring = query.toString();
    ctx.state.heldLogoutReturn = logoutReturn(client, target);
    await next();
    // The engine's form for this request: the question's, or the one it submits itself when no one
    // is signed in. Only if the engine made one: a request it refused leaves the form of an earlier
    // request in the session, which the target must not be bound to.
    const state = oidcOf(ctx)?.session?.state as { secret?: unknown; clientId?: unknown } | undefined;
    const madeForThisRequest = ctx.status < 400 && state?.clientId === target.clientId;
    if (madeForThisRequest && typeof state.secret === 'string') keep(ctx, cookiePath, { ...target, signOut: digest(state.secret), confirmed: false });
    else forget(ctx, cookiePath);
  };
}

/**
 * The engine's confirmation of a sign-out (POST /oauth/logout/confirm, accepted): the way back
 * held for the request whose form was sent is kept for the page the sign-out ends on; one held for
 * any other request is forgotten.
 */
export function confirmHeldLogoutReturns(provider: Provider, cookiePath: string): void {
  provider.on('end_session.success', (ctx: KoaContextWithOIDC) => {
    const held = read(ctx);
    if (!held) return;
    const xsrf = ctx.oidc.params?.xsrf;
    if (!held.confirmed && typeof xsrf === 'string' && held.signOut === digest(xsrf)) keep(ctx, cookiePath, { ...held, confirmed: true });
    else forget(ctx, cookiePath);
  });
}

/**
 * The way back for the page the sign-out ends on, forgotten once read; undefined when there is
 * none, when the sign-out it was held for was not confirmed, or when the page names another client.
 */
export async function takeLogoutReturn(ctx: KoaContextWithOIDC, provider: Provider, cookiePath: string): Promise<LogoutReturn | undefined> {
  const held = read(ctx);
  forget(ctx, cookiePath);
  if (!held?.confirmed) return undefined;
  const asking = ctx.oidc.client?.clientId;
  if (asking !== undefined && asking !== held.clientId) return undefined;
  const client = await findClient(provider, held.clientId);
  // Registered still: a client may have changed its URIs, or been deleted, since.
  return client && client.postLogoutRedirectUriAllowed(held.uri) ? logoutReturn(client, held) : undefined;
}

/** The request's post_logout_redirect_uri, when neither its id_token_hint nor the client's vetting vouches for it. */
async function unconfirmedTarget(ctx: Context, provider: Provider): Promise<{ client: Client; target: Target } | undefined> {
  const { client_id: clientId, post_logout_redirect_uri: uri, id_token_hint: hint, state } = ctx.query;
  // The engine reads an empty parameter as an absent one: an empty hint vouches for nothing.
  if ((hint !== undefined && hint !== '') || typeof clientId !== 'string' || typeof uri !== 'string' || (state !== undefined && typeof state !== 'string')) return undefined;
  // Loaded as the engine then loads it, so a client_id URL's new metadata document counts against the request's allowance once.
  const client = await clientOfRequest(provider, ctx, clientId).catch(() => undefined);
  if (!client || isVetted(client) || !client.postLogoutRedirectUriAllowed(uri)) return undefined;
  return { client, target: state === undefined ? { clientId, uri } : { clientId, uri, state } };
}

function logoutReturn(client: Client, { clientId, uri, state }: Target): LogoutReturn {
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

function keep(ctx: Context, cookiePath: string, held: HeldTarget): void {
  ctx.cookies.set(COOKIE, Buffer.from(JSON.stringify(held)).toString('base64url'), cookieOptions(cookiePath, MAX_AGE_MS));
}

function forget(ctx: Context, cookiePath: string): void {
  if (ctx.cookies.get(COOKIE) !== undefined) ctx.cookies.set(COOKIE, null, cookieOptions(cookiePath, 0));
}

function read(ctx: Context): HeldTarget | undefined {
  const value = ctx.cookies.get(COOKIE, { signed: true });
  return value ? parse(value) : undefined;
}

function parse(value: string): HeldTarget | undefined {
  try {
    const held = JSON.parse(Buffer.from(value, 'base64url').toString()) as Partial<HeldTarget>;
    const { clientId, uri, state, signOut, confirmed } = held;
    if (typeof clientId !== 'string' || typeof uri !== 'string' || (state !== undefined && typeof state !== 'string')) return undefined;
    if (typeof signOut !== 'string' || typeof confirmed !== 'boolean') return undefined;
    return state === undefined ? { clientId, uri, signOut, confirmed } : { clientId, uri, state, signOut, confirmed };
  } catch {
    return undefined;
  }
}

function cookieOptions(path: string, maxAge: number) {
  return { signed: true, httpOnly: true, sameSite: 'lax' as const, path, maxAge, overwrite: true };
}
