import type { KoaContextWithOIDC } from 'oidc-provider';

import type { Accounts } from '../accounts/accounts.ts';
import type { EnginePages } from '../engine/provider.ts';
import { clientDisplay, redirectTarget, type ClientDisplay } from '../pages/client_display.ts';
import { renderPage } from '../pages/render.ts';
import { ENGINE_ROUTES } from '../engine/routes.ts';
import { takeLogoutReturn } from './logout_return.ts';

export interface LogoutDependencies {
  accounts: Accounts;
  /** The issuer URL: the pages name the service by its host, the one the browser's address bar shows. */
  issuer: string;
}

/** The sign-out pages, and the answer to a confirmation whose form the engine no longer holds. */
export interface LogoutPages extends Pick<EnginePages, 'logoutSource' | 'postLogoutSuccessSource'> {
  /** Answers the engine's refusal `code` of a sign-out confirmation that came too late; false for any other error. */
  answerStaleConfirmation: (ctx: KoaContextWithOIDC, code: string) => Promise<boolean>;
}

/** The query parameter that marks the question asked again after a form that was out of date: the page says why. */
const ASKED_AGAIN = 'again';

/**
 * The product's pages for OpenID Connect RP-Initiated Logout 1.0, which the engine does
 * (`end_session_endpoint`, id_token_hint, post_logout_redirect_uri and state checks, the
 * confirmation form's xsrf): the question, and what happened.
 */
export function logoutPages({ accounts, issuer }: LogoutDependencies): LogoutPages {
  const service = new URL(issuer).host;
  const cookiePath = `${new URL(issuer).pathname.replace(/\/$/, '')}${ENGINE_ROUTES.end_session}`;
  return {
    logoutSource: async (ctx, form) => {
      const accountId = ctx.oidc.session?.accountId;
      const user = accountId ? await accounts.getUser(accountId) : undefined;
      const client = askingClient(ctx);
      // The engine checked it against the client's registered post_logout_redirect_uris (or dropped it without a client).
      const redirectUri = ctx.oidc.params?.post_logout_redirect_uri;
      const target = typeof redirectUri === 'string' ? redirectTarget(redirectUri) : undefined;
      await renderPage(ctx, 'logout', `Sign out of ${service}?`, {
        service,
        userEmail: user?.email,
        client,
        redirectHost: target?.label,
        heldReturn: ctx.state.heldLogoutReturn,
        askedAgain: ctx.query[ASKED_AGAIN] !== undefined,
        // The engine's form (its confirm URL and xsrf value); the page's buttons submit it.
        logoutForm: form,
      }, { formAction: target?.formAction ?? [], imgSrc: client?.logo && [client.logo.origin] });
    },
    postLogoutSuccessSource: async (ctx) => {
      // "Stay signed in" lands here too (when the client gave no post_logout_redirect_uri): say which happened.
      const session = await ctx.oidc.provider.Session.get(ctx);
      const signedOut = !session.accountId;
      await renderPage(ctx, 'logged_out', signedOut ? 'Signed out' : 'Still signed in', {
        service,
        signedOut,
        client: askingClient(ctx),
        heldReturn: await takeLogoutReturn(ctx, ctx.oidc.provider, cookiePath),
      });
    },
    /**
     * The engine keeps one confirmation form per browser session: a sign-out page opened later
     * (in another tab) replaces the form of an earlier one, and signing out or in again ends it.
     * The earlier form, sent, is refused as an invalid_request though no application took part:
     * a signed-in user is asked the question again (naming no application: the form sent does
     * not say which one asked), and anyone else is told they are signed out already, which is
     * what they asked for. A form sent from another site's page, which comes without the session
     * cookie, never gets here: src/pages/same_origin_forms.ts refuses it first. A browser that
     * does not say where its form came from is taken at its word that no one is signed in: asking
     * it again could send a browser that keeps no cookie round in a circle.
     */
    answerStaleConfirmation: async (ctx, code) => {
      if (ctx.oidc?.route !== 'end_session_confirm' || code !== 'invalid_request') return false;
      if (ctx.oidc.session?.accountId) {
        const question = new URL(ctx.oidc.urlFor('end_session'));
        question.searchParams.set(ASKED_AGAIN, '1');
        ctx.status = 303;
        ctx.redirect(question.href);
        return true;
      }
      ctx.status = 200;
      await renderPage(ctx, 'logged_out', 'Signed out', { service, signedOut: true, alreadySignedOut: true });
      return true;
    },
  };
}

/** The application that asked for the sign-out (known from id_token_hint or client_id), as the pages show it. */
function askingClient(ctx: KoaContextWithOIDC): ClientDisplay | undefined {
  const client = ctx.oidc.client;
  return client ? clientDisplay(client.clientId, client) : undefined;
}
