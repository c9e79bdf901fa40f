import type { Context, Next } from 'koa';
import type { Provider } from 'oidc-provider';

import type { Role } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';
import type { CsrfTokens } from '../pages/csrf.ts';
import { HttpError } from '../shared/http_error.ts';
import { signedIn, type SignedIn } from './session.ts';
import type { SettingsSignIn } from './sign_in.ts';

/** What the guards leave in `ctx.state` for the handlers (src/http/state.ts), once they have let the request through. */
export interface SettingsState {
  signedIn: SignedIn;
  /** On workspace routes: the workspace, which the user administers. */
  workspace: { id: string; name: string; role: Role };
}

/** Who is signed in, as requireSignIn left it. */
export function signedInOf(ctx: Context): SignedIn {
  const { signedIn } = ctx.state;
  if (!signedIn) throw new Error('a settings handler ran without requireSignIn');
  return signedIn;
}

/** The signed-in user and the workspace they administer, as requireSignIn and requireAdmin left them. */
export function adminOf(ctx: Context): SettingsState {
  const { workspace } = ctx.state;
  if (!workspace) throw new Error('a settings handler ran without requireAdmin');
  return { signedIn: signedInOf(ctx), workspace };
}

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
        throw new HttpError(403, 'session_expired', 'You are no longer signed in, so nothing was changed. Open the settings page to sign in again.');
      }
      ctx.state.signedIn = who;
      await next();
    },

    async checkForm(ctx: Context, next: Next) {
      if (!csrf.verify(csrfSubject(signedInOf(ctx)), (ctx.request.body as Record<string, unknown>).csrf)) {
        throw new HttpError(403, 'invalid_request', 'The form was not the one this server showed you, so nothing was changed. Open the settings page and try again.');
      }
      await next();
    },

    /** A member or viewer gets 403; anyone not in the workspace 404 (whether it exists is not theirs to know). */
    async requireAdmin(ctx: Context, next: Next) {
      const { user } = signedInOf(ctx);
      const workspace = await accounts.membershipIn(user.id, String(ctx.params.workspaceId));
      if (!workspace) throw new HttpError(404, 'not_found', 'You are not a member of this workspace, or there is no such workspace.');
      if (workspace.role !== 'admin') throw new HttpError(403, 'access_denied', 'Only an admin of this workspace can manage its members, API keys and applications.');
      ctx.state.workspace = workspace;
      await next();
    },

    /** The token the page's forms carry. */
    formToken(ctx: Context): string {
      return csrf.issue(csrfSubject(signedInOf(ctx)));
    },
  };
}

/**
 * What a settings form's token is bound to: the engine session and its user, so it dies with a
 * sign-out or a sign-in as another account, and not with an application authorized in another tab.
 */
function csrfSubject({ sessionUid, user }: SignedIn): string {
  return `settings:${sessionUid}:${user.id}`;
}
