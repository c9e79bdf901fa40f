import { setTimeout as sleep } from 'node:timers/promises';

import { bodyParser } from '@koa/bodyparser';
import Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import type { Provider } from 'oidc-provider';

import type { Role, Store } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';
import { CsrfTokens } from '../interactions/csrf.ts';
import { renderErrorPage } from '../interactions/pages.ts';
import type { GrantActivity } from '../oauth/grant_activity.ts';
import type { GrantWorkspaces } from '../oauth/grant_workspaces.ts';
import { PROPAGATION_BOUND_MS } from '../oauth/propagation.ts';
import type { ApiKeys } from '../resource/api_keys.ts';
import { copyScript, COPY_SCRIPT_PATH } from './assets.ts';
import { ConnectedApps } from './connected_apps.ts';
import { SettingsPages } from './pages.ts';
import { signedIn, type SignedIn } from './session.ts';
import { SettingsSignIn } from './sign_in.ts';
import { SETTINGS_PATH } from './sign_in_client.ts';
import { WorkspaceAdmin } from './workspace_admin.ts';

export interface SettingsDependencies {
  provider: Provider;
  accounts: Accounts;
  store: Store;
  grantWorkspaces: GrantWorkspaces;
  grantActivity: GrantActivity;
  /** The same instance the data API verifies keys with, so a revoked key is refused here at once. */
  apiKeys: ApiKeys;
  /** Keys the forms' tokens (csrf) with: the cookie key, as the login and consent forms do. */
  csrfKey: string;
  issuer: string;
  basePath: string;
}

type FormBody = Record<string, unknown>;

/** What the guards put in `ctx.state` for the handlers. */
interface SettingsState {
  signedIn: SignedIn;
  workspace?: { id: string; name: string; role: Role };
}

function settingsPath(basePath: string): string {
  return `${basePath}${SETTINGS_PATH}`;
}

/** Whether a request is the settings area's (src/server/app.ts runs the router only for these). */
export function inSettingsArea(basePath: string): (path: string) => boolean {
  const home = settingsPath(basePath);
  return (path) => path === home || path.startsWith(`${home}/`);
}

/**
 * The settings area, `{issuer}/settings`: every user's connected applications, and for a
 * workspace admin the workspace's API keys and the clients bound to it. Server-rendered pages
 * behind the engine's own sign-in; every form is a POST carrying a token bound to the session,
 * answered with a redirect (303) to the page it came from, except the one that shows a new key.
 */
export function settingsRouter(dependencies: SettingsDependencies): Router {
  const { provider, store, grantWorkspaces, grantActivity } = dependencies;
  const deps = {
    ...dependencies,
    csrf: new CsrfTokens(dependencies.csrfKey),
    connectedApps: new ConnectedApps({ provider, grants: store.model('Grant'), grantWorkspaces, grantActivity }),
    clients: store.model('Client'),
  };
  const router = new Router({ prefix: settingsPath(deps.basePath) });
  const signIn = new SettingsSignIn(deps.provider, deps.issuer, deps.basePath);
  const pages = new SettingsPages(deps);
  const admin = new WorkspaceAdmin(deps);
  const form = formBody();
  const home = settingsPath(deps.basePath);

  router.get(COPY_SCRIPT_PATH, copyScript);

  router.get('/callback', async (ctx) => {
    const next = await signIn.finish(ctx);
    if (next) {
      ctx.status = 303;
      ctx.redirect(next);
      return;
    }
    ctx.status = 400;
    await renderErrorPage(ctx, 'session_expired', `Open ${deps.issuer}${SETTINGS_PATH} to sign in again`);
  });

  /** Pages need a signed-in browser (one without is sent to sign in); forms also their session's token. */
  const requireSignIn = async (ctx: Context, next: Next) => {
    const who = await signedIn(deps.provider, deps.accounts, ctx);
    if (!who) {
      if (ctx.method === 'GET' || ctx.method === 'HEAD') return signIn.start(ctx);
      ctx.status = 403;
      return renderErrorPage(ctx, 'session_expired', 'You are no longer signed in, so nothing was changed. Open the settings page to sign in again');
    }
    (ctx.state as SettingsState).signedIn = who;
    await next();
  };
  const checkForm = async (ctx: Context, next: Next) => {
    const { sessionId } = (ctx.state as SettingsState).signedIn;
    if (!deps.csrf.verify(csrfSubject(sessionId), (ctx.request.body as FormBody).csrf)) {
      ctx.status = 403;
      return renderErrorPage(ctx, 'invalid_request', 'The form was not the one this server showed you, so nothing was changed. Open the settings page and try again');
    }
    await next();
  };
  /** Workspace pages and forms are for its admins: a member or viewer gets 403, anyone else 404. */
  const requireAdmin = async (ctx: Context, next: Next) => {
    const { user } = (ctx.state as SettingsState).signedIn;
    const workspace = await deps.accounts.membershipIn(user.id, String(ctx.params.workspaceId));
    if (!workspace) {
      ctx.status = 404;
      return renderErrorPage(ctx, 'not_found', 'You are not a member of this workspace, or there is no such workspace.');
    }
    if (workspace.role !== 'admin') {
      ctx.status = 403;
      return renderErrorPage(ctx, 'access_denied', 'Only an admin of this workspace can manage its API keys and applications.');
    }
    (ctx.state as SettingsState).workspace = workspace;
    await next();
  };
  const state = (ctx: Context) => ctx.state as Required<SettingsState>;
  const token = (ctx: Context) => deps.csrf.issue(csrfSubject(state(ctx).signedIn.sessionId));
  /**
   * After a revocation: this instance refuses at once, every other within PROPAGATION_BOUND_MS; the
   * answer waits that long (as the admin CLI does), so "revoked" on the page means revoked everywhere.
   */
  const revokedEverywhere = async (ctx: Context, path: string, done: string) => {
    await sleep(PROPAGATION_BOUND_MS);
    ctx.status = 303;
    ctx.redirect(`${path}?done=${done}`);
  };

  router.get('/', requireSignIn, (ctx) => pages.home(ctx, state(ctx).signedIn.user, token(ctx), ctx.query.done));

  router.post('/applications/revoke', requireSignIn, form, checkForm, async (ctx) => {
    const grantId = (ctx.request.body as FormBody).grant;
    if (typeof grantId !== 'string' || !await deps.connectedApps.revoke(state(ctx).signedIn.user.id, grantId)) {
      ctx.status = 404;
      return renderErrorPage(ctx, 'not_found', 'You have not allowed this application, or its access was already revoked.');
    }
    await revokedEverywhere(ctx, home, 'app-revoked');
  });

  const workspacePage = (ctx: Context) => `${home}/workspaces/${state(ctx).workspace.id}`;

  router.get('/workspaces/:workspaceId', requireSignIn, requireAdmin, (ctx) => {
    return pages.workspace(ctx, state(ctx).signedIn.user, state(ctx).workspace, token(ctx), { done: ctx.query.done });
  });

  router.post('/workspaces/:workspaceId/api-keys', requireSignIn, requireAdmin, form, checkForm, async (ctx) => {
    const { user, workspace } = { user: state(ctx).signedIn.user, workspace: state(ctx).workspace };
    const created = await admin.createKey(workspace.id, ctx.request.body as FormBody);
    if ('error' in created) {
      ctx.status = 400;
      return pages.workspace(ctx, user, workspace, token(ctx), { error: created.error, name: created.name });
    }
    // The key is shown this once, on this response; it is never in a URL or a log.
    return pages.keyCreated(ctx, user, workspace, created);
  });

  router.post('/workspaces/:workspaceId/api-keys/revoke', requireSignIn, requireAdmin, form, checkForm, async (ctx) => {
    const keyId = (ctx.request.body as FormBody).key;
    if (typeof keyId !== 'string' || !await admin.revokeKey(state(ctx).workspace.id, keyId)) {
      ctx.status = 404;
      return renderErrorPage(ctx, 'not_found', 'This workspace has no such API key: it may have been revoked already, or have expired.');
    }
    await revokedEverywhere(ctx, workspacePage(ctx), 'key-revoked');
  });

  return router;
}

/** Reads a form body (at most 16 KiB); one it cannot read gets the error page, not the API's JSON error. */
function formBody(): Middleware {
  const parse = bodyParser({ enableTypes: ['form'], formLimit: '16kb' });
  return async (ctx, next) => {
    try {
      await parse(ctx, async () => undefined);
    } catch (error) {
      const status = (error as { status?: unknown }).status;
      if (typeof status !== 'number' || status < 400 || status >= 500) throw error;
      ctx.status = status;
      return renderErrorPage(ctx, 'invalid_request', status === 413 ? 'The form was larger than this server accepts, so nothing was changed' : 'The form could not be read, so nothing was changed');
    }
    await next();
  };
}

/** What a settings form's token is bound to: the engine session, so it dies with a sign-out or a new sign-in. */
function csrfSubject(sessionId: string): string {
  return `settings:${sessionId}`;
}
