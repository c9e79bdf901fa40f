import type { Context, Middleware } from 'koa';

import { isVetted } from '../../clients/vetting.ts';
import { authorizationErrorOf, type AuthorizationError } from '../../engine/authorization_errors.ts';
import { oidcOf } from '../../engine/context.ts';
import { ENGINE_ROUTES } from '../../engine/routes.ts';
import { renderReturnToClientPage, type HeldError } from '../../pages/return_to_client.ts';
import { errorDescriptionFor, isErrorDescriptionCharset } from '../../shared/error_description.ts';
import { answerErrorsAs } from '../errors.ts';
import { formPostAsGet, restorePostedForm, type PostedFormSteps } from '../form_post_as_get.ts';
import type { PostedForms } from '../posted_forms.ts';

/**
 * /oauth/authorize (and /oauth/authorize/:uid, where the engine resumes after the login and
 * consent pages): what runs around the engine's authorization endpoint.
 *
 * Before the engine:
 * 1. POST is answered with 303 to a GET naming the form parked in the store (authorizationByPost);
 * 2. the host's errors are answered with the error page;
 * 3. on that GET, the parked form becomes the request's query (restorePostedForm), which the
 *    engine then serves as any GET.
 * Within the engine, a client_id that is a metadata document URL not fetched lately counts
 * against the client address's registration allowance (src/engine/new_metadata_documents.ts).
 * After the engine:
 * 4. an error redirect's `error_description` is put in the characters RFC 6749 allows, and
 *    written for the few errors the engine leaves without one (errorDescriptionInCharset; the
 *    form_post page's in src/http/engine_auto_post.ts);
 * 5. an error the engine would send to an unvetted client's redirect URI is held on a page that
 *    lets the user decide (holdErrorRedirects).
 */
export function authorizationEndpoint(forms: PostedForms): Middleware[] {
  return [answerErrorsAs('page'), restorePostedForm(forms, REQUEST_NAME)];
}

export function authorizationByPost(posted: PostedFormSteps, issuer: string, path: string): Middleware {
  // OpenID Connect Core 3.1.2.1: the authorization endpoint MUST accept POST with a form body.
  return formPostAsGet(posted, `${issuer}${path}`, REQUEST_NAME);
}

const REQUEST_NAME = 'authorization request';

/** Marks the request as answered with the engine's error page, not with a redirect to the client. */
export function markErrorPageShown(ctx: Context): void {
  ctx.state.errorPageShown = true;
}

/**
 * RFC 9700 section 4.11.2: anyone can register a client with their own redirect URI at open
 * registration and send users an authorization request that fails on purpose (an unknown scope,
 * no PKCE), or that they will deny, to make this server bounce them to a phishing page. So an
 * error answer reaches an unvetted client's redirect URI only through the user: the page says
 * what went wrong and offers a plainly labelled way back to the application, which the user may
 * take or not. Vetted clients (src/clients/vetting.ts) keep the engine's redirect. A silent request
 * (`prompt=none`) keeps it only when the browser's signed-in user has already granted the client:
 * that is silent renewal, which cannot show a page; for anyone else a silent request is the same
 * bounce with a different error (`login_required`, `consent_required`), and is held like any other.
 */
export function holdErrorRedirects(issuer: string): Middleware {
  return async (ctx, next) => {
    await next();
    const error = authorizationErrorOf(ctx);
    if (!error || ctx.state.errorPageShown) return;
    errorDescriptionInCharset(ctx);
    const held = await heldError(ctx, error, issuer);
    if (!held) return;
    ctx.remove('Location');
    ctx.status = 400;
    await renderReturnToClientPage(ctx, held);
  };
}

async function heldError(ctx: Context, error: AuthorizationError, issuer: string): Promise<HeldError | undefined> {
  const client = oidcOf(ctx)?.client;
  const params = requestParams(ctx);
  const redirectUri = params.redirect_uri;
  if (!client || isVetted(client) || !redirectUri) return undefined;
  if (isSilent(params.prompt) && await signedInUserGranted(ctx, client.clientId)) return undefined;
  const location = ctx.response.get('Location') || undefined;
  const response: Record<string, string> = { error: error.error ?? 'invalid_request' };
  const description = errorDescriptionFor(response.error, error.error_description || undefined);
  if (description) response.error_description = description;
  if (params.state) response.state = params.state;
  response.iss = issuer;
  const signOutUrl = oidcOf(ctx)?.session?.accountId ? `${issuer}${ENGINE_ROUTES.end_session}` : undefined;
  return { clientId: client.clientId, clientName: client.clientName, redirectUri, response, location, signOutUrl, requestValues: requestValues(ctx) };
}

/**
 * RFC 6749 section 4.1.2.1: the error redirect's `error_description` in its charset, as every
 * JSON error's is (src/http/errors.ts). The engine writes the parameters with URLSearchParams, in
 * the query or the fragment; they are written back the same way, and only when one must change.
 */
function errorDescriptionInCharset(ctx: Context): void {
  const target = URL.parse(ctx.response.get('Location'));
  if (!target) return;
  for (const part of ['search', 'hash'] as const) {
    const params = new URLSearchParams(target[part].slice(1));
    const error = params.get('error');
    const description = params.get('error_description');
    if (error === null || (description !== null && isErrorDescriptionCharset(description))) continue;
    const described = errorDescriptionFor(error, description ?? undefined);
    if (described === undefined) continue;
    params.set('error_description', described);
    target[part] = params.toString();
    ctx.set('Location', target.href);
  }
}

/** The request's parameters as the engine resolved them, or as sent when it failed before that. */
function requestParams(ctx: Context): Record<string, string | undefined> {
  const oidc = oidcOf(ctx);
  const resolved = oidc?.params as Record<string, unknown> | undefined;
  const sent = (ctx.method === 'POST' ? oidc?.body : ctx.query) as Record<string, unknown> | undefined;
  const pick = (name: string) => {
    const value = resolved?.[name] ?? sent?.[name];
    return typeof value === 'string' ? value : undefined;
  };
  return { redirect_uri: pick('redirect_uri'), prompt: pick('prompt'), state: pick('state') };
}

/** Every string the request sent as a parameter's value, and those the engine resolved (a request object's, a pushed request's). */
function requestValues(ctx: Context): string[] {
  const oidc = oidcOf(ctx);
  const sources = [ctx.query, oidc?.params, ctx.method === 'POST' ? oidc?.body : undefined] as Array<Record<string, unknown> | undefined>;
  return sources.flatMap((source) => Object.values(source ?? {})).flat().filter((value): value is string => typeof value === 'string');
}

function isSilent(prompt: string | undefined): boolean {
  return prompt !== undefined && prompt.split(' ').includes('none');
}

/** The browser's session is signed in, and its user has a live grant for this client (they consented in this browser). */
async function signedInUserGranted(ctx: Context, clientId: string): Promise<boolean> {
  const oidc = oidcOf(ctx);
  const session = oidc?.session;
  const accountId = session?.accountId;
  const grantId = accountId ? session.grantIdFor(clientId) : undefined;
  if (!oidc || !grantId) return false;
  const grant = await oidc.provider.Grant.find(grantId);
  return grant !== undefined && grant.accountId === accountId && grant.clientId === clientId;
}
