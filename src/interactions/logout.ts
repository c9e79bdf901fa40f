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

/**
 * The product's pages for OpenID Connect RP-Initiated Logout 1.0, which the engine does
 * (`end_session_endpoint`, id_token_hint, post_logout_redirect_uri and state checks, the
 * confirmation form's xsrf): the question, and what happened.
 */
export function logoutPages({ accounts, issuer }: LogoutDependencies): Pick<EnginePages, 'logoutSource' | 'postLogoutSuccessSource'> {
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
  };
}

/** The application that asked for the sign-out (known from id_token_hint or client_id), as the pages show it. */
function askingClient(ctx: KoaContextWithOIDC): ClientDisplay | undefined {
  const client = ctx.oidc.client;
  return client ? clientDisplay(client.clientId, client) : undefined;
}
