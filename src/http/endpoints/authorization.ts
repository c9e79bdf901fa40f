import type { Context, Middleware } from 'koa';
import type { KoaContextWithOIDC } from 'oidc-provider';

import { authorizationErrorOf, type AuthorizationError } from '../../engine/authorization_errors.ts';
import { isVetted } from '../../clients/vetting.ts';

/** An error answer the engine addressed to a client the server has no reason to trust. */
export interface HeldError {
  clientId: string;
  clientName: string | undefined;
  redirectUri: string;
  /** The response the engine would have sent (error, error_description, state, iss). */
  response: Record<string, string>;
  /** The engine's own redirect (query or fragment response mode); absent for form_post. */
  location: string | undefined;
}

export type ShowHeldError = (ctx: Context, held: HeldError) => Promise<void>;

interface HeldState {
  /** Set by the engine's error page (renderError): it showed a page instead of answering the client. */
  errorPageShown?: boolean;
}

/** Marks the request as answered with the engine's error page, not with a redirect to the client. */
export function markErrorPageShown(ctx: Context): void {
  (ctx.state as HeldState).errorPageShown = true;
}

/**
 * RFC 9700 section 4.11.2: anyone can register a client with their own redirect URI at open
 * registration and send users an authorization request that fails on purpose (an unknown scope,
 * no PKCE), or that they will deny, to make this server bounce them to a phishing page. So an
 * error answer reaches an unvetted client's redirect URI only through the user: the page says
 * what went wrong and offers a plainly labelled way back to the application, which the user may
 * take or not. Vetted clients (client_vetting.ts) and silent requests (`prompt=none`, which the
 * client must be able to answer without a page) keep the engine's redirect.
 */
export function holdErrorRedirects(issuer: string, show: ShowHeldError): Middleware {
  return async (ctx, next) => {
    await next();
    const error = authorizationErrorOf(ctx);
    if (!error || (ctx.state as HeldState).errorPageShown) return;
    const held = heldError(ctx as unknown as KoaContextWithOIDC, error, issuer);
    if (!held) return;
    ctx.remove('Location');
    ctx.status = 400;
    await show(ctx, held);
  };
}

function heldError(ctx: KoaContextWithOIDC, error: AuthorizationError, issuer: string): HeldError | undefined {
  const client = ctx.oidc?.client;
  const params = requestParams(ctx);
  const redirectUri = params.redirect_uri;
  if (!client || isVetted(client) || !redirectUri || isSilent(params.prompt)) return undefined;
  const location = ctx.response.get('Location') || undefined;
  const response: Record<string, string> = { error: error.error ?? 'invalid_request' };
  if (error.error_description) response.error_description = error.error_description;
  if (params.state) response.state = params.state;
  response.iss = issuer;
  return { clientId: client.clientId, clientName: client.clientName, redirectUri, response, location };
}

/** The request's parameters as the engine resolved them, or as sent when it failed before that. */
function requestParams(ctx: KoaContextWithOIDC): Record<string, string | undefined> {
  const resolved = ctx.oidc?.params as Record<string, unknown> | undefined;
  const sent = (ctx.method === 'POST' ? ctx.oidc?.body : ctx.query) as Record<string, unknown> | undefined;
  const pick = (name: string) => {
    const value = resolved?.[name] ?? sent?.[name];
    return typeof value === 'string' ? value : undefined;
  };
  return { redirect_uri: pick('redirect_uri'), prompt: pick('prompt'), state: pick('state') };
}

function isSilent(prompt: string | undefined): boolean {
  return prompt !== undefined && prompt.split(' ').includes('none');
}
