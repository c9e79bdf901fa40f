import Router from '@koa/router';
import type { Context } from 'koa';
import { errors, type InteractionResults, type Provider } from 'oidc-provider';

import type { Accounts } from '../accounts/accounts.ts';
import type { SignIns } from '../rate_limits/limits.ts';
import type { GrantWorkspaces } from '../grants/workspaces.ts';
import { isVetted } from '../clients/vetting.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { ENGINE_ROUTES, INTERACTION_PATH } from '../engine/routes.ts';
import { PASSWORD_ACR, PASSWORD_AMR } from '../engine/authentication_context.ts';
import { requestedClaimNames } from '../engine/requested_claims.ts';
import { SCOPE_DESCRIPTIONS, describeClaims } from '../pages/scope_descriptions.ts';
import type { CsrfTokens } from '../pages/csrf.ts';
import { clientDisplay, redirectTarget, type ClientDisplay } from '../pages/client_display.ts';
import { formBody } from '../pages/form_body.ts';
import { renderPage } from '../pages/render.ts';
import { HttpError } from '../shared/http_error.ts';
import { nowSeconds } from '../shared/clock.ts';

export interface InteractionDependencies {
  provider: Provider;
  accounts: Accounts;
  grantWorkspaces: GrantWorkspaces;
  csrf: CsrfTokens;
  basePath: string;
  /** The data APIs' resource identifier, which user grants are for. */
  audience: string;
  /** Password checks, limited per address and per account (locks), failures logged. */
  signIns: SignIns;
}

type Details = Awaited<ReturnType<Provider['interactionDetails']>>;
type FormBody = Record<string, unknown>;

/** The login and consent pages the engine sends the browser to, and their form handlers. */
export function interactionRouter(deps: InteractionDependencies): Router {
  const { provider, csrf, basePath } = deps;
  const router = new Router({ prefix: `${basePath}${INTERACTION_PATH}` });
  const form = formBody();

  router.use(async (_ctx, next) => {
    try {
      await next();
    } catch (error) {
      if (error instanceof errors.SessionNotFound) throw new HttpError(400, 'session_expired', '');
      throw error;
    }
  });

  router.get('/:uid', async (ctx) => {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (details.prompt.name === 'login') return showLogin(ctx, deps, details);
    if (details.prompt.name === 'consent') return showConsent(ctx, deps, details);
    throw new HttpError(400, 'invalid_request', `unsupported interaction ${details.prompt.name}`);
  });

  router.post('/:uid/login', form, async (ctx) => {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    const body = ctx.request.body as FormBody;
    if (!csrf.verify(details.uid, body.csrf)) throw forgedForm();
    if (details.prompt.name !== 'login') return showConsent(ctx, deps, details);

    const email = typeof body.email === 'string' ? body.email : '';
    const password = typeof body.password === 'string' ? body.password : '';
    const outcome = email && password ? await deps.signIns.attempt(email, ctx.ip, () => deps.accounts.authenticate(email, password)) : {};
    if (outcome.refused) {
      ctx.status = 429;
      ctx.set('Retry-After', String(outcome.refused.retryAfter));
      return showLogin(ctx, deps, details, { email, error: outcome.refused.message });
    }
    const user = outcome.user;
    if (!user) {
      ctx.status = 401;
      return showLogin(ctx, deps, details, { email, error: 'The email or password is not right.' });
    }
    const result: InteractionResults = { login: { accountId: user.id, acr: PASSWORD_ACR, amr: PASSWORD_AMR } };
    await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
  });

  router.post('/:uid/consent', form, async (ctx) => {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    const body = ctx.request.body as FormBody;
    if (!csrf.verify(details.uid, body.csrf)) throw forgedForm();
    if (details.prompt.name !== 'consent' || !details.session?.accountId) return showLogin(ctx, deps, details);

    if (body.decision !== 'allow') {
      const result: InteractionResults = { error: 'access_denied', error_description: 'the user denied the request' };
      await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
      return;
    }
    const accountId = details.session.accountId;
    const chosen = typeof body.workspace === 'string' ? await deps.accounts.membershipIn(accountId, body.workspace) : undefined;
    if (!chosen) {
      ctx.status = 400;
      return showConsent(ctx, deps, details, 'Choose one of your workspaces.');
    }
    const grantId = await saveGrant(deps, details, accountId, chosen.id);
    await provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  });

  return router;
}

async function showLogin(ctx: Context, { provider, csrf, basePath }: InteractionDependencies, details: Details, form: { email?: string; error?: string } = {}) {
  const client = await findClient(provider, details);
  await renderPage(ctx, 'login', 'Sign in', {
    clientName: client.name,
    client,
    action: `${basePath}${INTERACTION_PATH}/${details.uid}/login`,
    csrfToken: csrf.issue(details.uid),
    // OpenID Connect Core 3.1.2.1: login_hint is how the client names the account it expects.
    email: form.email ?? loginHint(details),
    error: form.error,
  }, { formAction: redirectTarget(String(details.params.redirect_uri)).formAction, imgSrc: client.logo?.origin });
}

function loginHint(details: Details): string {
  const hint = details.params.login_hint;
  return typeof hint === 'string' && hint.length <= 254 ? hint : '';
}

/** The application the interaction is for, as the pages show it (its own logo and documents, never another's). */
async function findClient(provider: Provider, details: Details): Promise<ClientDisplay> {
  const clientId = String(details.params.client_id);
  const client = await provider.Client.find(clientId);
  return clientDisplay(clientId, client, client !== undefined && isVetted(client));
}

async function showConsent(ctx: Context, deps: InteractionDependencies, details: Details, error?: string) {
  const { provider, accounts, csrf, basePath } = deps;
  const accountId = details.session?.accountId;
  const user = accountId ? await accounts.getUser(accountId) : undefined;
  if (!user) {
    throw new HttpError(400, 'session_expired', '');
  }
  const workspaces = await accounts.workspacesOf(user.id);
  if (workspaces.length === 0) {
    throw new HttpError(403, 'access_denied', 'Your account is not a member of any workspace, so it cannot authorize applications. Ask a workspace admin to add you.');
  }
  const client = await findClient(provider, details);
  const target = redirectTarget(String(details.params.redirect_uri));
  const scopes = consentItems(details);
  await renderPage(ctx, 'consent', 'Authorize', {
    clientName: client.name,
    client,
    redirectHost: target.label,
    userEmail: user.email,
    signOutUrl: `${basePath}${ENGINE_ROUTES.end_session}`,
    scopes,
    workspaces: workspaces.map(({ id, name, role }) => ({ id, name, role })),
    action: `${basePath}${INTERACTION_PATH}/${details.uid}/consent`,
    csrfToken: csrf.issue(details.uid),
    error,
  }, { formAction: target.formAction, imgSrc: client.logo?.origin });
}

/** What the consent page lists: each scope, and the claims asked for by name that no scope already covers. */
function consentItems(details: Details): Array<{ value: string; description: string }> {
  const scope = String(details.params.scope ?? '').split(' ').filter(Boolean);
  const items = scope.map((value) => ({ value, description: SCOPE_DESCRIPTIONS[value] ?? value }));
  const named = scope.includes('profile') ? [] : requestedClaimNames(details.params.claims);
  if (named.length) items.push({ value: 'claims', description: describeClaims(named) });
  return items;
}

/**
 * Records what the user allowed (scopes, and claims asked for by name). A grant is tied to one workspace: consenting for another
 * workspace starts a new grant rather than moving the old one's tokens.
 */
async function saveGrant({ provider, grantWorkspaces, audience }: InteractionDependencies, details: Details, accountId: string, workspaceId: string): Promise<string> {
  const clientId = String(details.params.client_id);
  const existing = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
  const sameWorkspace = existing && await grantWorkspaces.workspaceOf(existing.jti) === workspaceId;
  const grant = sameWorkspace ? existing : new provider.Grant({ accountId, clientId });

  if (sameWorkspace) {
    // The engine lists what the existing grant lacks.
    const prompt = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[]; missingResourceScopes?: Record<string, string[]> };
    if (prompt.missingOIDCScope) grant.addOIDCScope(prompt.missingOIDCScope.join(' '));
    if (prompt.missingOIDCClaims) grant.addOIDCClaims(prompt.missingOIDCClaims);
    for (const [resource, scopes] of Object.entries(prompt.missingResourceScopes ?? {})) {
      grant.addResourceScope(resource, scopes.join(' '));
    }
  } else {
    const scope = String(details.params.scope ?? '');
    grant.addOIDCScope(scope);
    grant.addOIDCClaims(requestedClaimNames(details.params.claims));
    grant.addResourceScope(audience, scope);
  }
  const grantId = await grant.save();
  const expiresIn = grant.exp ? grant.exp - nowSeconds() : LIFETIMES.Grant;
  await grantWorkspaces.bind(grantId, workspaceId, expiresIn);
  return grantId;
}

function forgedForm(): HttpError {
  return new HttpError(403, 'invalid_request', 'The form was not the one this server showed you. Go back to the application and start again.');
}
