import { setTimeout as sleep } from 'node:timers/promises';

import Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { Provider } from 'oidc-provider';

import type { Store } from '../../adapters/store.ts';
import type { Accounts, Member } from '../accounts/accounts.ts';
import { CsrfTokens } from '../pages/csrf.ts';
import { HttpError } from '../shared/http_error.ts';
import type { Logger } from '../shared/logger.ts';
import type { GrantActivity } from '../grants/activity.ts';
import type { GrantWorkspaces } from '../grants/workspaces.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';
import type { ApiKeys } from '../api_keys/api_keys.ts';
import { renewSessionId, sessionIdInCookie } from '../engine/session_renewal.ts';
import type { UserAccess } from '../engine/user_access.ts';
import type { SignIns } from '../rate_limits/limits.ts';
import { settingsScript, SETTINGS_SCRIPT_PATH } from './assets.ts';
import { ConnectedApps } from './connected_apps.ts';
import { formBody, PASSWORD_FORM_LIMIT } from '../pages/form_body.ts';
import { adminOf, settingsGuards, signedInOf } from './guards.ts';
import { invitationsOver } from './invitations.ts';
import { lastAdminYourself, noSuchRole, roleOf, WorkspaceMembers, type MemberChange, type MemberRefusal } from './members.ts';
import { SettingsPages } from './pages.ts';
import { PasswordChange } from './password.ts';
import { signedIn } from './session.ts';
import { RenewedSessions } from './renewed_sessions.ts';
import { SentForms } from './sent_forms.ts';
import { SettingsSignIn } from './sign_in.ts';
import { SETTINGS_PATH } from '../clients/first_party.ts';
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
  /** Ends a user's other sessions (a password change) and a removed member's grants for the workspace. */
  userAccess: UserAccess;
  /** The current password is checked as a sign-in is: the same limits and locks. */
  signIns: SignIns;
  issuer: string;
  basePath: string;
  /** The audit lines: invitations made, cancelled and accepted (never a link's secret). */
  logger: Logger;
}

type FormBody = Record<string, unknown>;

/** Whether a request is the settings area's (src/http/app.ts runs the router only for these). */
export function inSettingsArea(basePath: string): (path: string) => boolean {
  const home = `${basePath}${SETTINGS_PATH}`;
  return (path) => path === home || path.startsWith(`${home}/`);
}

/**
 * The settings area, `{issuer}/settings`: every user's connected applications and password, the
 * invitation links they are sent, and for a workspace admin the workspace's API keys, the clients
 * bound to it, its members and the invitations to it. Server-rendered pages behind the engine's own
 * sign-in; every form is a POST carrying a token bound to the session, answered with a redirect
 * (303) to the page it came from, except those that show a new key or invitation link once.
 * Whatever cannot be undone is asked first on a confirmation page of its own (a GET).
 */
export function settingsRouter(dependencies: SettingsDependencies): Router {
  const { provider, accounts, store, grantWorkspaces, grantActivity, issuer, basePath } = dependencies;
  const home = `${basePath}${SETTINGS_PATH}`;
  const connectedApps = new ConnectedApps({ provider, grants: store.model('Grant'), grantWorkspaces, grantActivity, userAccess: dependencies.userAccess });
  const renewedSessions = new RenewedSessions(store.model('ReplayDetection'));
  const signIn = new SettingsSignIn(provider, issuer, basePath, renewedSessions);
  const pages = new SettingsPages({ ...dependencies, connectedApps, clients: store.model('Client') });
  const admin = new WorkspaceAdmin({ apiKeys: dependencies.apiKeys, markers: store.model('ReplayDetection') });
  const members = new WorkspaceMembers(dependencies);
  const invitations = invitationsOver(store, accounts);
  const { logger } = dependencies;
  const sentForms = new SentForms(store.model('ReplayDetection'));
  const passwords = new PasswordChange({ ...dependencies, renewedSessions });
  const csrf = new CsrfTokens(dependencies.csrfKey);
  const { requireSignIn, checkForm, requireAdmin, formToken } = settingsGuards({ provider, accounts, csrf, signIn });
  const form = formBody();
  const passwordForm = formBody(PASSWORD_FORM_LIMIT);
  const router = new Router({ prefix: home });

  /**
   * After a revocation or a change of membership: this instance applies it at once, every other
   * within PROPAGATION_BOUND_MS (the revocation list, the API key cache, live roles); the answer
   * waits that long (as the admin CLI does), so "revoked" on the page means revoked everywhere.
   * The form is marked as having made its change first, for a second sending of it (answerRepeat).
   */
  const doneEverywhere = async (ctx: Context, path: string, done: string, query: Record<string, string> = {}): Promise<void> => {
    const location = `${path}?${new URLSearchParams({ done, ...query })}`;
    await sentForms.record(signedInOf(ctx).user.id, ctx.path, ctx.request.body as FormBody, location);
    await answerWhenEverywhere(ctx, location);
  };

  /** As doneEverywhere, for a change every instance reads from the store at once: nothing to wait for. */
  const doneNow = async (ctx: Context, path: string, done: string, query: Record<string, string> = {}): Promise<void> => {
    const location = `${path}?${new URLSearchParams({ done, ...query })}`;
    await sentForms.record(signedInOf(ctx).user.id, ctx.path, ctx.request.body as FormBody, location);
    ctx.status = 303;
    ctx.redirect(location);
  };

  /**
   * A confirmation form sent again once its change was made (a double click without JavaScript, a
   * retry): answered as its first sending was, where the change would now be refused as already
   * made (a key or member gone, a role already so, an admin role given up). Before requireAdmin,
   * which would refuse an admin who stepped down or left with the first sending.
   */
  const answerRepeat = async (ctx: Context, next: Next): Promise<void> => {
    const location = await sentForms.answerOf(signedInOf(ctx).user.id, ctx.path, ctx.request.body as FormBody);
    // The first sending may still be waiting for its change to reach every instance: so does this one.
    if (location) return answerWhenEverywhere(ctx, location);
    await next();
  };

  /** As answerRepeat, for forms whose change every instance reads from the store at once (doneNow): answered without waiting. */
  const answerRepeatNow = async (ctx: Context, next: Next): Promise<void> => {
    const location = await sentForms.answerOf(signedInOf(ctx).user.id, ctx.path, ctx.request.body as FormBody);
    if (!location) return next();
    ctx.status = 303;
    ctx.redirect(location);
  };

  router.get(SETTINGS_SCRIPT_PATH, settingsScript);

  router.get('/callback', async (ctx) => {
    // A response this browser did not ask for (or a sign-in overtaken by one in another tab): a
    // browser that is signed in all the same goes to the settings home, any other sees why not.
    const next = await signIn.finish(ctx) ?? (await signedIn(provider, accounts, ctx) ? home : undefined);
    if (!next) throw new HttpError(400, 'session_expired', 'Your sign-in took too long, or did not start in this browser. Start again from Settings.');
    ctx.status = 303;
    ctx.redirect(next);
  });

  /**
   * A workspace the settings home names in its banner after the user stepped down as its admin or
   * left it (which they may no longer read), or joined it: by its id and a seal bound to the user,
   * so that an address made up elsewhere names no workspace.
   */
  const sealPurpose = (userId: string, workspaceId: string) => `settings-banner-workspace:${userId}:${workspaceId}`;
  const namingWorkspace = (userId: string, workspaceId: string) => ({ workspace: workspaceId, seal: csrf.issue(sealPurpose(userId, workspaceId)) });
  const namedWorkspace = async (ctx: Context): Promise<string | undefined> => {
    const { workspace, seal } = ctx.query;
    if (typeof workspace !== 'string' || !csrf.verify(sealPurpose(signedInOf(ctx).user.id, workspace), seal)) return undefined;
    return (await accounts.getWorkspace(workspace))?.name;
  };

  router.get('/', requireSignIn, async (ctx) => pages.home(ctx, signedInOf(ctx).user, ctx.query.done, await namedWorkspace(ctx)));

  // Every destructive action: GET asks (a page with the form), POST does it.
  router.get('/applications/revoke', requireSignIn, async (ctx) => {
    const { user } = signedInOf(ctx);
    const grantId = ctx.query.grant;
    const app = typeof grantId === 'string' ? await connectedApps.find(user.id, grantId) : undefined;
    if (!app) throw noSuchApp();
    return pages.confirmAppRevocation(ctx, user, app, formToken(ctx));
  });

  router.post('/applications/revoke', requireSignIn, form, checkForm, answerRepeat, async (ctx) => {
    const grantId = (ctx.request.body as FormBody).grant;
    if (typeof grantId !== 'string' || !await connectedApps.revoke(signedInOf(ctx).user.id, grantId)) throw noSuchApp();
    await doneEverywhere(ctx, home, 'app-revoked');
  });

  router.get('/password', requireSignIn, (ctx) => pages.password(ctx, signedInOf(ctx).user, formToken(ctx)));

  /** The password form sent again with a session cookie its first sending's password change renewed: signed out, and told why. */
  const passwordChangedBefore = async (ctx: Context, next: Next): Promise<void> => {
    if (await renewedSessions.renewed(sessionIdInCookie(provider, ctx))) return pages.passwordChangedBefore(ctx);
    await next();
  };

  router.post('/password', passwordChangedBefore, requireSignIn, passwordForm, checkForm, async (ctx) => {
    const { user, sessionId } = signedInOf(ctx);
    const refusal = await passwords.change(user, sessionId, ctx.request.body as FormBody, ctx);
    // Refused (the current password is the new one now) because the first sending of this form changed it meanwhile.
    if (refusal && await renewedSessions.renewed(sessionId)) return pages.passwordChangedBefore(ctx);
    if (refusal) {
      ctx.status = refusal.status;
      if (refusal.retryAfter !== undefined) ctx.set('Retry-After', String(refusal.retryAfter));
      return pages.password(ctx, user, formToken(ctx), refusal);
    }
    // The other sessions are deleted from the store, which every instance reads: nothing to wait for.
    // This one stays signed in under a new id: a copy of its cookie, which may be why the
    // password is being changed, signs no one in.
    await renewedSessions.record(sessionId);
    // Renewed already by a first sending of this form, which this one overtook after the session was read.
    if (!await renewSessionId(provider, ctx)) return pages.passwordChangedBefore(ctx);
    ctx.status = 303;
    ctx.redirect(`${home}?done=password-changed`);
  });

  router.get('/workspaces/:workspaceId', requireSignIn, requireAdmin, (ctx) => {
    const { signedIn, workspace } = adminOf(ctx);
    return pages.workspace(ctx, signedIn.user, workspace, formToken(ctx), { done: ctx.query.done });
  });

  router.post('/workspaces/:workspaceId/api-keys', requireSignIn, requireAdmin, form, checkForm, async (ctx) => {
    const { signedIn, workspace } = adminOf(ctx);
    const created = await admin.createKey(workspace.id, ctx.request.body as FormBody);
    if ('error' in created) {
      ctx.status = created.status ?? 400;
      return pages.workspace(ctx, signedIn.user, workspace, formToken(ctx), created);
    }
    // The key is shown this once, on this response; it is never in a URL or a log.
    return pages.keyCreated(ctx, signedIn.user, workspace, created);
  });

  // Where a new key was shown, opened again (a reload, a restored tab): the key is not shown twice.
  router.get('/workspaces/:workspaceId/api-keys', (ctx) => {
    ctx.status = 303;
    ctx.redirect(`${home}/workspaces/${encodeURIComponent(ctx.params.workspaceId!)}`);
  });

  // Where a new invitation's link was shown, opened again: the link is not shown twice.
  router.get('/workspaces/:workspaceId/invitations', (ctx) => {
    ctx.status = 303;
    ctx.redirect(`${home}/workspaces/${encodeURIComponent(ctx.params.workspaceId!)}/members`);
  });

  router.get('/workspaces/:workspaceId/api-keys/revoke', requireSignIn, requireAdmin, async (ctx) => {
    const { signedIn, workspace } = adminOf(ctx);
    const keyId = ctx.query.key;
    const key = typeof keyId === 'string' ? await admin.findKey(workspace.id, keyId) : undefined;
    if (!key) throw noSuchKey();
    return pages.confirmKeyRevocation(ctx, signedIn.user, workspace, key, formToken(ctx));
  });

  router.post('/workspaces/:workspaceId/api-keys/revoke', requireSignIn, form, checkForm, answerRepeat, requireAdmin, async (ctx) => {
    const { workspace } = adminOf(ctx);
    const keyId = (ctx.request.body as FormBody).key;
    if (typeof keyId !== 'string' || !await admin.revokeKey(workspace.id, keyId)) throw noSuchKey();
    await doneEverywhere(ctx, `${home}/workspaces/${workspace.id}`, 'key-revoked');
  });

  const membersPage = (workspaceId: string) => `${home}/workspaces/${workspaceId}/members`;

  /** The members page: its members, the form that invites someone, the invitations pending. */
  const showMembers = async (ctx: Context, form: { done?: unknown; error?: string }) => {
    const { signedIn, workspace } = adminOf(ctx);
    const [list, pending] = await Promise.all([members.list(workspace.id), invitations.pending(workspace.id)]);
    return pages.members(ctx, signedIn.user, workspace, list, pending, formToken(ctx), form);
  };

  /** The members page again, saying why a change was refused (a 409 for the last admin). */
  const refusedOnMembersPage = async (ctx: Context, refusal: MemberRefusal) => {
    const { signedIn, workspace } = adminOf(ctx);
    ctx.status = refusal.status;
    // The last admin asking to step down or leave is spoken to, not of.
    const error = refusal.lastAdmin === signedIn.user.id ? lastAdminYourself(workspace.name) : refusal.error;
    return showMembers(ctx, { error });
  };

  /**
   * Where the admin goes once a membership changed: back to the members page, or to the settings
   * home when the change took their own admin role away (the members page is no longer theirs).
   */
  const afterChange = async (ctx: Context, change: MemberChange<Member>, kind: 'role' | 'removal') => {
    if ('refused' in change) return refusedOnMembersPage(ctx, change.refused);
    const { signedIn, workspace } = adminOf(ctx);
    // No longer an admin: their pending invitations are deleted, so that being made one again revives none.
    if (kind === 'removal' || change.done.role !== 'admin') await invitations.voidInvitationsBy(workspace.id, change.done.user.id);
    const stillAdmin = change.done.user.id !== signedIn.user.id || (kind === 'role' && change.done.role === 'admin');
    if (!stillAdmin) {
      return doneEverywhere(ctx, home, kind === 'removal' ? 'left-workspace' : 'left-admin', namingWorkspace(signedIn.user.id, workspace.id));
    }
    return doneEverywhere(ctx, membersPage(workspace.id), kind === 'removal' ? 'member-removed' : 'role-changed');
  };

  /** A role change to the role the member has: nothing changes, and the members page says so. */
  const unchangedRole = (ctx: Context, workspaceId: string) => {
    ctx.status = 303;
    ctx.redirect(`${membersPage(workspaceId)}?done=role-unchanged`);
  };

  router.get('/workspaces/:workspaceId/members', requireSignIn, requireAdmin, (ctx) => showMembers(ctx, { done: ctx.query.done }));

  router.get('/workspaces/:workspaceId/members/:userId/role', requireSignIn, requireAdmin, async (ctx) => {
    const { signedIn, workspace } = adminOf(ctx);
    const role = roleOf(ctx.query.role);
    if (!role) return refusedOnMembersPage(ctx, noSuchRole());
    const checked = await members.check(workspace.id, String(ctx.params.userId), { role });
    if ('refused' in checked) return refusedOnMembersPage(ctx, checked.refused);
    if (checked.done.role === role) return unchangedRole(ctx, workspace.id);
    return pages.confirmRoleChange(ctx, signedIn.user, workspace, checked.done, role, formToken(ctx));
  });

  router.post('/workspaces/:workspaceId/members/:userId/role', requireSignIn, form, checkForm, answerRepeat, requireAdmin, async (ctx) => {
    const { workspace } = adminOf(ctx);
    const userId = String(ctx.params.userId);
    const chosen = (ctx.request.body as FormBody).role;
    const role = roleOf(chosen);
    const current = role && await members.check(workspace.id, userId, { role });
    if (current && 'done' in current && current.done.role === role) return unchangedRole(ctx, workspace.id);
    return afterChange(ctx, await members.setRole(workspace.id, userId, chosen), 'role');
  });

  router.get('/workspaces/:workspaceId/members/:userId/remove', requireSignIn, requireAdmin, async (ctx) => {
    const { signedIn, workspace } = adminOf(ctx);
    const checked = await members.check(workspace.id, String(ctx.params.userId), 'remove');
    if ('refused' in checked) return refusedOnMembersPage(ctx, checked.refused);
    return pages.confirmRemoval(ctx, signedIn.user, workspace, checked.done, formToken(ctx));
  });

  router.post('/workspaces/:workspaceId/members/:userId/remove', requireSignIn, form, checkForm, answerRepeat, requireAdmin, async (ctx) => {
    const { workspace } = adminOf(ctx);
    const change = await members.remove(workspace.id, String(ctx.params.userId));
    return afterChange(ctx, change, 'removal');
  });

  router.post('/workspaces/:workspaceId/invitations', requireSignIn, requireAdmin, form, checkForm, async (ctx) => {
    const { signedIn, workspace } = adminOf(ctx);
    const created = await invitations.createFromForm(workspace.id, signedIn.user.id, ctx.request.body as FormBody);
    if ('refused' in created) return refusedOnMembersPage(ctx, created.refused);
    const { invitation } = created;
    logger.info('invitation created', { workspace_id: workspace.id, invitation_id: invitation.id, role: invitation.role, invited_by: signedIn.user.id });
    // The link is shown this once, on this response; its secret is never in a log or a later page.
    return pages.invitationCreated(ctx, signedIn.user, workspace, created);
  });

  router.get('/workspaces/:workspaceId/invitations/:invitationId/cancel', requireSignIn, requireAdmin, async (ctx) => {
    const { signedIn, workspace } = adminOf(ctx);
    const invitation = await invitations.find(workspace.id, String(ctx.params.invitationId));
    if (!invitation) throw noSuchInvitation();
    return pages.confirmInvitationCancel(ctx, signedIn.user, workspace, invitation, formToken(ctx));
  });

  router.post('/workspaces/:workspaceId/invitations/:invitationId/cancel', requireSignIn, form, checkForm, answerRepeatNow, requireAdmin, async (ctx) => {
    const { signedIn, workspace } = adminOf(ctx);
    const cancelled = await invitations.cancel(workspace.id, String(ctx.params.invitationId));
    if (!cancelled) throw noSuchInvitation();
    logger.info('invitation cancelled', { workspace_id: workspace.id, invitation_id: cancelled.id, cancelled_by: signedIn.user.id });
    // Every instance reads invitations from the store: nothing to wait for.
    await doneNow(ctx, membersPage(workspace.id), 'invitation-cancelled');
  });

  // An invitation link: signed in (the settings area's sign-in brings the browser back here), the
  // invitation and the form that accepts it; for a member already, that they are.
  // The link with a slash after it: sent to the link itself first, which the sign-in returns to.
  router.get('/invitations/:secret/', async (ctx, next) => {
    if (!ctx.path.endsWith('/')) return next();
    ctx.status = 308;
    ctx.redirect(`${home}/invitations/${encodeURIComponent(String(ctx.params.secret))}`);
  });

  /** A used link opened or sent again by whoever used it: the workspace it added them to, rather than that it is used. */
  const invalidUnlessJoined = async (ctx: Context, secret: string): Promise<void> => {
    const { user } = signedInOf(ctx);
    const joined = await invitations.joinedWith(secret, user.id);
    if (!joined) throw invalidInvitation();
    return pages.invitationJoined(ctx, user, joined.workspace, joined.role);
  };

  router.get('/invitations/:secret', requireSignIn, async (ctx) => {
    const { user } = signedInOf(ctx);
    const open = await invitations.open(String(ctx.params.secret));
    if (!open) return invalidUnlessJoined(ctx, String(ctx.params.secret));
    const role = await accounts.roleIn(user.id, open.workspace.id);
    return pages.invitation(ctx, user, open, formToken(ctx), role);
  });

  router.post('/invitations/:secret', requireSignIn, form, checkForm, answerRepeatNow, async (ctx) => {
    const { user } = signedInOf(ctx);
    const accepted = await invitations.accept(String(ctx.params.secret), user.id);
    if ('invalid' in accepted) return invalidUnlessJoined(ctx, String(ctx.params.secret));
    if ('alreadyMember' in accepted) {
      ctx.status = 409;
      return pages.invitation(ctx, user, accepted.alreadyMember, formToken(ctx), accepted.role);
    }
    const { invitation } = accepted.joined;
    logger.info('invitation accepted', {
      workspace_id: invitation.workspaceId, invitation_id: invitation.id, role: invitation.role, invited_by: invitation.invitedBy, user_id: user.id,
    });
    // A new membership: the user holds no token for the workspace yet, and the pages and the consent page
    // read memberships from the store, so nothing to wait for.
    await doneNow(ctx, home, 'invitation-accepted', namingWorkspace(user.id, invitation.workspaceId));
  });

  return router;
}

const noSuchApp = () => new HttpError(404, 'not_found', 'You have not allowed this application, or its access was already revoked.');
const noSuchKey = () => new HttpError(404, 'not_found', 'This workspace has no such API key: it may have been revoked already, or have expired.');
const noSuchInvitation = () => new HttpError(404, 'not_found', 'This workspace has no such pending invitation: it may have been cancelled or accepted already, or have expired.');
/** Unknown, expired, used, cancelled or void: which of these is not said (the link's holder learns nothing more from it). */
const invalidInvitation = () => new HttpError(410, 'invalid_invitation', '');

/** Redirects to `location` once a change made on this instance has reached every other (PROPAGATION_BOUND_MS). */
async function answerWhenEverywhere(ctx: Context, location: string): Promise<void> {
  await sleep(PROPAGATION_BOUND_MS);
  ctx.status = 303;
  ctx.redirect(location);
}
