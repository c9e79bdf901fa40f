import type { Context, Next } from 'koa';
import type { Provider } from 'oidc-provider';

import type { Role } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';
import type { CsrfTokens } from '../pages/csrf.ts';
import { renderErrorPage } from '../pages/render.ts';
import { signedIn, type SignedIn } from './session.ts';
import type { SettingsSignIn } from './sign_in.ts';

/** What the guards leave in `ctx.state` for the handlers. */
export interface SettingsState {
  signedIn: SignedIn;
  /** On workspace routes: the workspace, which the user administers. */
  workspace: { id: string; name: string; role: Role };
}

export const settingsState = (ctx: Context) => ctx.state as SettingsState;

export interface GuardDependencies {
  provider: Provider;
  accounts: Accounts;
  csrf: CsrfTokens;
  signIn: SettingsSignIn;
}

/**
 * Who may do what in the settings area: pages need a signed-in browser (one without is sent to
 * sign in), forms also the token of their session, workspace routes an admin of the workspace.
 */
export function settingsGuards({ provider, accounts, csrf, signIn }: GuardDependencies) {
  return {
    async requireSignIn(ctx: Context, next: Next) {
      const who = await signedIn(provider, accounts, ctx);
      if (!who) {
        if (ctx.method === 'GET' || ctx.method === 'HEAD') return signIn.start(ctx);
        ctx.status = 403;
        return renderErrorPage(ctx, 'session_expired', 'You are no longer signed in, so nothing was changed. Open the settings page to sign in again');
      }
      settingsState(ctx).signedIn = who;
      await next();
    },

    async checkForm(ctx: Context, next: Next) {
      const { sessionId } = settingsState(ctx).signedIn;
      if (!csrf.verify(csrfSubject(sessionId), (ctx.request.body as Record<string, unknown>).csrf)) {
        ctx.status = 403;
        return renderErrorPage(ctx, 'invalid_request', 'The form was not the one this server showed you, so nothing was changed. Open the settings page and try again');
      }
      await next();
    },

    /** A member or viewer gets 403; anyone not in the workspace 404 (whether it exists is not theirs to know). */
    async requireAdmin(ctx: Context, next: Next) {
      const { user } = settingsState(ctx).signedIn;
      const workspace = await accounts.membershipIn(user.id, String(ctx.params.workspaceId));
      if (!workspace) {
        ctx.status = 404;
        return renderErrorPage(ctx, 'not_found', 'You are not a member of this workspace, or there is no such workspace.');
      }
      if (workspace.role !== 'admin') {
        ctx.status = 403;
        return renderErrorPage(ctx, 'access_denied', 'Only an admin of this workspace can manage its API keys and applications.');
      }
      settingsState(ctx).workspace = workspace;
      await next();
    },

    /** The token the page's forms carry. */
    formToken(ctx: Context): string {
      return csrf.issue(csrfSubject(settingsState(ctx).signedIn.sessionId));
    },
  };
}

/** What a settings form's token is bound to: the engine session, so it dies with a sign-out or a new sign-in. */
function csrfSubject(sessionId: string): string {
  return `settings:${sessionId}`;
}
