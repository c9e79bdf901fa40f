import Router from '@koa/router';
import type { Context } from 'koa';
import { errors, type InteractionResults } from 'oidc-provider';

import { SETTINGS_CLIENT_ID } from '../clients/first_party.ts';
import { ACR_VALUES, demandsUnofferedAcr, PASSWORD_ACR, PASSWORD_AMR } from '../engine/authentication_context.ts';
import { SELECT_ACCOUNT_PROMPT } from '../engine/interaction_policy.ts';
import { INTERACTION_PATH } from '../engine/routes.ts';
import { formBody } from '../pages/form_body.ts';
import { DENIED_BY_THE_USER } from '../pages/return_to_client.ts';
import type { SignIns } from '../rate_limits/limits.ts';
import { HttpError } from '../shared/http_error.ts';
import { saveGrant, showConsent, type ConsentDependencies } from './consent.ts';
import { finishInteraction } from './finish.ts';
import { showLogin, type Details } from './login.ts';

export interface InteractionDependencies extends ConsentDependencies {
  /** Password checks, limited per address and per account (locks), failures logged. */
  signIns: SignIns;
}

type FormBody = Record<string, unknown>;

/**
 * A sign-in whose interaction is gone (it took longer than the interaction lives, or was finished
 * in another tab). The settings area's sign-in form says it is one (views/login.ejs): the page
 * then leads back to the settings area, where the person came from, not to an application.
 */
function expired(ctx: Context): HttpError {
  if ((ctx.request.body as FormBody | undefined)?.from !== 'settings') return new HttpError(400, 'session_expired', '');
  ctx.state.settingsSignIn = true;
  return new HttpError(400, 'session_expired', 'Your sign-in took too long. Start again from Settings.');
}

const WORKSPACE_NOT_YOURS = 'The workspace you chose is not one of yours, or no longer: nothing was shared with the application. Choose one of your workspaces.';

/** The login and consent pages the engine sends the browser to, and their form handlers. */
export function interactionRouter(deps: InteractionDependencies): Router {
  const { provider, csrf, basePath } = deps;
  const router = new Router({ prefix: `${basePath}${INTERACTION_PATH}` });
  const form = formBody();

  router.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      if (error instanceof errors.SessionNotFound) throw expired(ctx);
      throw error;
    }
  });

  router.get('/:uid', async (ctx) => {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (details.prompt.name === 'login' && demandsUnofferedAcr(details.prompt)) {
      return finishInteraction(ctx, provider, UNOFFERED_ACR, { mergeWithLastSubmission: false });
    }
    if (asksToSignIn(details)) return showLogin(ctx, deps, details);
    if (details.prompt.name === 'consent' && details.params.client_id === SETTINGS_CLIENT_ID) {
      return finishInteraction(ctx, provider, SETTINGS_NEED_NO_CONSENT, { mergeWithLastSubmission: false });
    }
    if (details.prompt.name === 'consent') return showConsent(ctx, deps, details);
    throw new HttpError(400, 'invalid_request', `unsupported interaction ${details.prompt.name}`);
  });

  // The address a form posted to, opened again (the address bar, history): its interaction's page.
  /** 303 to the interaction's own page, which shows whatever it asks now (sign-in, consent, or that it has ended). */
  const toInteractionPage = (ctx: Context, uid: string) => {
    ctx.status = 303;
    ctx.redirect(`${basePath}${INTERACTION_PATH}/${encodeURIComponent(uid)}`);
  };

  router.get(['/:uid/login', '/:uid/consent'], (ctx) => toInteractionPage(ctx, ctx.params.uid!));

  // "Sign in with another account" on the consent page: the sign-in form, for the same request.
  router.get('/:uid/switch', async (ctx) => {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (!switchesAccount(details)) return toInteractionPage(ctx, details.uid);
    return showLogin(ctx, deps, details, { switching: true });
  });

  router.post('/:uid/login', form, async (ctx) => {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    const body = ctx.request.body as FormBody;
    if (!csrf.verify(details.uid, body.csrf)) throw forgedForm();
    const switching = body.switch === '1' && switchesAccount(details);
    if (!asksToSignIn(details) && !switching) return showConsent(ctx, deps, details);

    const email = typeof body.email === 'string' ? body.email : '';
    const password = typeof body.password === 'string' ? body.password : '';
    const outcome = email && password ? await deps.signIns.attempt(email, ctx, () => deps.accounts.authenticate(email, password)) : {};
    if (outcome.refused) {
      ctx.state.signInRefused = 'rate_limited';
      ctx.status = 429;
      ctx.set('Retry-After', String(outcome.refused.retryAfter));
      return showLogin(ctx, deps, details, { email, error: outcome.refused.message, switching });
    }
    const user = outcome.user;
    if (!user) {
      ctx.state.signInRefused = 'invalid_credentials';
      // Not 401: HTTP requires a 401 to carry a WWW-Authenticate challenge, and a form has none.
      ctx.status = 400;
      return showLogin(ctx, deps, details, { email, error: 'The email or password is not right.', switching });
    }
    const result: InteractionResults = { login: { accountId: user.id, acr: PASSWORD_ACR, amr: PASSWORD_AMR } };
    // The account signed in with is the one chosen.
    if (details.prompt.name === SELECT_ACCOUNT_PROMPT) result[SELECT_ACCOUNT_PROMPT] = {};
    await finishInteraction(ctx, provider, result, { mergeWithLastSubmission: false });
  });

  router.post('/:uid/consent', form, async (ctx) => {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    const body = ctx.request.body as FormBody;
    if (!csrf.verify(details.uid, body.csrf)) throw forgedForm();
    if (details.prompt.name !== 'consent' || !details.session?.accountId) return showLogin(ctx, deps, details);
    if (details.params.client_id === SETTINGS_CLIENT_ID) throw new HttpError(400, 'invalid_request', 'the account settings are not an application to allow');
    // The first answer stands: the form sent again (a double click, the back button) goes on with it,
    // so no second grant is made and an allow is not left behind by a later deny.
    if (details.result) {
      ctx.status = 303;
      ctx.redirect(details.returnTo);
      return;
    }

    if (body.decision !== 'allow') {
      const result: InteractionResults = { error: 'access_denied', error_description: DENIED_BY_THE_USER };
      await finishInteraction(ctx, provider, result, { mergeWithLastSubmission: false });
      return;
    }
    // An application deleted while its page was open gets no grant (the engine would refuse its resume anyway).
    if (!await provider.Client.find(String(details.params.client_id))) throw new HttpError(400, 'invalid_client', 'the application is no longer registered');
    const accountId = details.session.accountId;
    const chosen = typeof body.workspace === 'string' ? await deps.accounts.membershipIn(accountId, body.workspace) : undefined;
    if (!chosen) {
      ctx.status = 400;
      // A workspace named that is not the user's: one they were removed from while the page was open, most likely.
      const named = typeof body.workspace === 'string' && body.workspace !== '';
      return showConsent(ctx, deps, details, named ? WORKSPACE_NOT_YOURS : 'Choose one of your workspaces.');
    }
    const grantId = await saveGrant(deps, details, accountId, chosen.id);
    await finishInteraction(ctx, provider, { consent: { grantId } }, { mergeWithLastSubmission: true });
  });

  return router;
}

/** Whether the interaction is a signed-in user's consent, which another account may take over (the settings area's sign-in asks none). */
function switchesAccount(details: Details): boolean {
  return details.prompt.name === 'consent' && Boolean(details.session?.accountId) && details.params.client_id !== SETTINGS_CLIENT_ID;
}

/** Whether the interaction's prompt is answered by signing in: `login`, and `select_account`, whose account is chosen by signing in with it. */
function asksToSignIn(details: Details): boolean {
  return details.prompt.name === 'login' || details.prompt.name === SELECT_ACCOUNT_PROMPT;
}

/**
 * The settings area's own sign-in is shown no consent page: its grant is made on the spot
 * (src/engine/first_party_grant.ts), and one allowed on a consent page would name a workspace,
 * which buys an access token the user could neither see nor revoke in the settings area.
 */
const SETTINGS_NEED_NO_CONSENT: InteractionResults = {
  error: 'access_denied',
  error_description: 'the account settings sign-in asks for no consent',
};

/** A request that insists on an authentication this server does not offer: a failed authentication (OpenID Connect Core 5.5.1.1). */
const UNOFFERED_ACR: InteractionResults = {
  error: 'access_denied',
  error_description: `the requested authentication context class (acr) is not offered here; this server offers ${ACR_VALUES.join(', ')}`,
};

function forgedForm(): HttpError {
  return new HttpError(403, 'invalid_request', 'The form was not the one this server showed you. Go back to the application and start again.');
}
