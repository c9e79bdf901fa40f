import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';

import type { Accounts } from '../accounts/accounts.ts';
import { clientDisplay, redirectTarget, renderPage, type ClientDisplay } from '../pages/render.ts';

type LogoutFeature = NonNullable<NonNullable<Configuration['features']>['rpInitiatedLogout']>;

export interface LogoutDependencies {
  accounts: Accounts;
  /** The issuer URL: the pages name the service by its host, the one the browser's address bar shows. */
  issuer: string;
}

/**
 * OpenID Connect RP-Initiated Logout 1.0, done by the engine (`end_session_endpoint`,
 * id_token_hint, post_logout_redirect_uri and state checks, the confirmation form's xsrf), with
 * the product's own pages. Signing out ends the browser's session only: tokens outlive it
 * (`expiresWithSession` is false, so the engine marks every authorization `persistsLogout` and
 * revokes no grant).
 */
export function rpInitiatedLogout({ accounts, issuer }: LogoutDependencies): LogoutFeature {
  const service = new URL(issuer).host;
  return {
    enabled: true,
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
        // The engine's form (its confirm URL and xsrf value); the page's buttons submit it.
        logoutForm: form,
      }, { formAction: target?.formAction ?? [], imgSrc: client?.logo?.origin });
    },
    postLogoutSuccessSource: async (ctx) => {
      // "Stay signed in" lands here too (when the client gave no post_logout_redirect_uri): say which happened.
      const session = await ctx.oidc.provider.Session.get(ctx);
      const signedOut = !session.accountId;
      await renderPage(ctx, 'logged_out', signedOut ? 'Signed out' : 'Still signed in', {
        service,
        signedOut,
        client: askingClient(ctx),
      });
    },
  };
}

/** The application that asked for the sign-out (known from id_token_hint or client_id), as the pages show it. */
function askingClient(ctx: KoaContextWithOIDC): ClientDisplay | undefined {
  const client = ctx.oidc.client;
  return client ? clientDisplay(client.clientId, client) : undefined;
}
