import type { Context } from 'koa';

import type { ApiKeyRecord, ModelStore, Role, User, Workspace } from '../../adapters/store.ts';
import type { Accounts, Member } from '../accounts/accounts.ts';
import { MIN_PASSWORD_LENGTH } from '../accounts/passwords.ts';
import { renderPage } from '../pages/render.ts';
import { plural } from '../shared/words.ts';
import { ENGINE_ROUTES } from '../engine/routes.ts';
import { MAX_NAME_LENGTH, type ApiKeys, type NewApiKey } from '../api_keys/api_keys.ts';
import { DEFAULT_EXPIRY, EXPIRY_CHOICES, type ApiKeyFormRefusal } from './api_key_form.ts';
import { newFormId } from './form_ids.ts';
import { SETTINGS_SCRIPT_PATH } from './assets.ts';
import type { ConnectedApp, ConnectedApps } from './connected_apps.ts';
import { INVITATION_LIFETIME_SECONDS, shortId, type Invitation, type NewInvitation, type OpenInvitation } from './invitations.ts';
import { article, ROLE_DESCRIPTIONS } from './members.ts';
import type { PasswordRefusal } from './password.ts';
import { SETTINGS_PATH } from '../clients/first_party.ts';
import { shownTime, type ShownTime } from './times.ts';
import { boundClients } from './workspace_clients.ts';

export interface PagesDependencies {
  accounts: Accounts;
  connectedApps: ConnectedApps;
  apiKeys: ApiKeys;
  clients: ModelStore;
  issuer: string;
  basePath: string;
}

interface WorkspaceRef {
  id: string;
  name: string;
  role: Role;
}

/** What a redirect-after-post came back to say (`?done=`): fixed sentences, never anything from the request. */
const DONE: Record<string, string> = {
  'app-revoked': 'Access revoked. The application’s tokens no longer work; it would have to ask you again.',
  'key-revoked': 'API key revoked. It no longer works.',
  'password-changed': 'Password changed. Every other browser signed in as you has been signed out; this one stays signed in.',
  'role-changed': 'Role changed. It applies everywhere now, to the applications the member allowed too.',
  'role-unchanged': 'Nothing changed: that was already their role.',
  'member-removed': 'Member removed. They no longer reach this workspace, and the applications they allowed for it lost their access.',
  'left-admin': 'Your role changed: you no longer manage that workspace.',
  'left-workspace': 'You left the workspace. The applications you allowed for it lost their access.',
  'invitation-cancelled': 'Invitation cancelled. Its link no longer works.',
  'invitation-accepted': 'You joined the workspace: it is under Your workspaces below.',
};

const DAY_SECONDS = 24 * 60 * 60;

/** The role an invitation is for unless the admin chooses another. */
const DEFAULT_INVITED_ROLE: Role = 'member';

/** The sentences above that name the workspace, when the address names it (sealed: src/settings/router.ts). */
const DONE_IN: Record<string, (workspace: string) => string> = {
  'left-admin': (workspace) => `Your role changed: you are no longer an admin of ${workspace}.`,
  'left-workspace': (workspace) => `You left ${workspace}. The applications you allowed for it lost their access.`,
  'invitation-accepted': (workspace) => `You joined ${workspace}: it is under Your workspaces below.`,
};

/** One line of what a confirmation page shows of the thing about to change: a time, or words. */
interface Fact {
  term: string;
  text: string;
  time?: ShownTime | undefined;
  /** The text is an email address: shown breaking after its @ and before its dots (views/_email.ejs). */
  email?: boolean;
}

/**
 * A destructive action asked once more, on a page of its own (GET): what is about to change and
 * what follows, a POST form carrying the session's token that does it, and a way back that
 * changes nothing. Works without JavaScript.
 */
export interface Confirmation {
  title: string;
  explanation: string[];
  facts: Fact[];
  /** Where the form posts, and the fields naming what it acts on. */
  action: string;
  fields: Record<string, string>;
  confirm: string;
  cancel: { href: string; label: string };
}

/** The settings area's pages, rendered in the pages' layout (views/settings*.ejs). */
export class SettingsPages {
  readonly #deps: PagesDependencies;
  readonly #home: string;

  constructor(deps: PagesDependencies) {
    this.#deps = deps;
    this.#home = `${deps.basePath}${SETTINGS_PATH}`;
  }

  /** Connected applications, and the user's workspaces (an admin's link to manage each); `namedWorkspace`, the one the user stepped down from, left or joined. */
  async home(ctx: Context, user: User, done: unknown, namedWorkspace?: string): Promise<void> {
    const { accounts, connectedApps } = this.#deps;
    const [workspaces, apps] = await Promise.all([accounts.workspacesOf(user.id), connectedApps.of(user.id)]);
    const names = new Map(workspaces.map(({ id, name }) => [id, name]));
    await this.#render(ctx, 'settings', 'Settings', user, {
      message: namedWorkspace !== undefined && typeof done === 'string' && Object.hasOwn(DONE_IN, done) ? DONE_IN[done]!(namedWorkspace) : doneMessage(done),
      // Asks first: each link leads to a confirmation page (GET), so it carries no token.
      revokeAction: `${this.#home}/applications/revoke`,
      apps: await Promise.all(apps.map(async (app) => ({
        ...app,
        workspaceName: app.workspaceId ? names.get(app.workspaceId) ?? (await accounts.getWorkspace(app.workspaceId))?.name : undefined,
        granted: shownTime(app.grantedAt),
        lastUsed: shownTime(app.lastUsedAt),
      }))),
      workspaces: workspaces.map(({ id, name, role }) => ({
        name,
        role,
        manage: role === 'admin' ? `${this.#home}/workspaces/${id}` : undefined,
        members: role === 'admin' ? `${this.#home}/workspaces/${id}/members` : undefined,
      })),
      passwordPage: `${this.#home}/password`,
    });
  }

  /** The user's own password: the current one, and the new one twice. */
  async password(ctx: Context, user: User, csrfToken: string, refusal?: PasswordRefusal): Promise<void> {
    await this.#render(ctx, 'settings_password', 'Change your password', user, {
      csrfToken,
      action: `${this.#home}/password`,
      // Password managers file the new password under this account (a hidden username field).
      email: user.email,
      minLength: MIN_PASSWORD_LENGTH,
      error: refusal?.error,
      // The field to fix has the focus, and names the error.
      field: refusal?.field,
    });
  }

  /**
   * The password form sent again after its first sending changed the password and renewed this
   * browser's session, whose new id the browser missed (src/settings/renewed_sessions.ts): it is
   * signed out, and told why. For no user (there is no session), so with no script and no form.
   */
  async passwordChangedBefore(ctx: Context): Promise<void> {
    await renderPage(ctx, 'settings_password_changed', 'Your password was changed', { settingsPage: true, home: this.#home });
  }

  /**
   * An admin's page of a workspace's members: each one's name, email and role, and the ways to
   * change them; the form that invites someone, and the invitations pending.
   */
  async members(ctx: Context, user: User, workspace: WorkspaceRef, members: Member[], invitations: Invitation[], csrfToken: string, form: { done?: unknown; error?: string }): Promise<void> {
    const page = `${this.#home}/workspaces/${workspace.id}/members`;
    const invitedBy = await this.#inviters(invitations, members);
    await this.#render(ctx, 'settings_members', `${workspace.name}: members`, user, {
      workspace,
      message: doneMessage(form.done),
      error: form.error,
      back: `${this.#home}/workspaces/${workspace.id}`,
      roles: Object.entries(ROLE_DESCRIPTIONS).map(([role, description]) => ({ role, description })),
      members: members.map((member, index) => ({
        index,
        name: member.user.name,
        email: member.user.email,
        role: member.role,
        you: member.user.id === user.id,
        // Both ask first (GET: a confirmation page), so the role form and the removal link carry no token.
        roleAction: `${page}/${member.user.id}/role`,
        removeAction: `${page}/${member.user.id}/remove`,
      })),
      csrfToken,
      inviteAction: `${this.#home}/workspaces/${workspace.id}/invitations`,
      invitedRole: DEFAULT_INVITED_ROLE,
      invitationLifetime: plural(INVITATION_LIFETIME_SECONDS / DAY_SECONDS, 'day'),
      // Each form shown makes at most one invitation: sent again (a reload), it makes none.
      formId: newFormId(),
      invitations: invitations.map((invitation) => ({
        ...shownInvitation(invitation, invitedBy.get(invitation.invitedBy)),
        // Asks first (GET: a confirmation page), so this link carries no token.
        cancelAction: `${this.#home}/workspaces/${workspace.id}/invitations/${invitation.id}/cancel`,
      })),
    });
  }

  /** The new invitation's link, shown this once, with a copy button (public/settings.js; selectable by hand without it). */
  async invitationCreated(ctx: Context, user: User, workspace: WorkspaceRef, { invitation, secret }: NewInvitation): Promise<void> {
    await this.#render(ctx, 'settings_invitation_created', 'Invitation link created', user, {
      workspace,
      link: `${this.#deps.issuer}${SETTINGS_PATH}/invitations/${secret}`,
      invitation: shownInvitation(invitation, { email: user.email, admin: true }),
      article: article(invitation.role),
      back: `${this.#home}/workspaces/${workspace.id}/members`,
    });
  }

  /** Cancelling a pending invitation, asked once more. */
  async confirmInvitationCancel(ctx: Context, user: User, workspace: WorkspaceRef, invitation: Invitation, csrfToken: string): Promise<void> {
    const page = `${this.#home}/workspaces/${workspace.id}/members`;
    const shown = shownInvitation(invitation, (await this.#inviters([invitation], await this.#deps.accounts.listMembers(workspace.id))).get(invitation.invitedBy));
    await this.confirm(ctx, user, csrfToken, {
      title: `Cancel this invitation to ${workspace.name}?`,
      explanation: [
        'Its link stops working at once: whoever has it can no longer join the workspace with it. To invite them again, create a new link.',
      ],
      facts: [
        { term: 'Invitation', text: shown.shortId },
        { term: 'Role', text: invitation.role },
        { term: 'Invited by', text: shown.invitedBy },
        { term: 'Created', text: 'Unknown', time: shown.created },
        { term: 'Expires', text: 'Unknown', time: shown.expires },
      ],
      action: `${this.#home}/workspaces/${workspace.id}/invitations/${invitation.id}/cancel`,
      fields: {},
      confirm: 'Cancel the invitation',
      cancel: { href: page, label: 'Keep the invitation' },
    });
  }

  /**
   * An invitation link opened by a signed-in user: who invites them to which workspace with which
   * role, and the form that accepts it. Or, for a member of the workspace already, that they are.
   */
  async invitation(ctx: Context, user: User, open: OpenInvitation, csrfToken: string, already?: Role): Promise<void> {
    const { invitation, workspace, inviter } = open;
    const title = already ? `You are already a member of ${workspace.name}` : `${inviter.email} invited you to join ${workspace.name} as ${article(invitation.role)} ${invitation.role}`;
    await this.#render(ctx, 'settings_invitation', title, user, {
      heading: title,
      workspaceName: workspace.name,
      role: invitation.role,
      article: article(invitation.role),
      description: ROLE_DESCRIPTIONS[invitation.role],
      inviter: inviter.email,
      expires: shownTime(invitation.expiresAt),
      already,
      csrfToken,
      action: ctx.path,
      // Sent twice (a double click without JavaScript, a retry), the form is answered as its first sending was.
      formId: newFormId(),
    });
  }

  /**
   * A used invitation link opened again by whoever used it (the back button, a second click): the
   * workspace it added them to, and a way there (its page for an admin, the settings home else).
   */
  async invitationJoined(ctx: Context, user: User, workspace: Workspace, role: Role): Promise<void> {
    const title = `You joined ${workspace.name} with this invitation`;
    await this.#render(ctx, 'settings_invitation', title, user, {
      heading: title,
      joined: {
        role,
        article: article(role),
        href: role === 'admin' ? `${this.#home}/workspaces/${workspace.id}` : this.#home,
        label: role === 'admin' ? `Go to ${workspace.name}` : 'Go to your settings, where it is under Your workspaces',
      },
    });
  }

  /** Changing a member's role, asked once more. */
  async confirmRoleChange(ctx: Context, user: User, workspace: WorkspaceRef, member: Member, role: Role, csrfToken: string): Promise<void> {
    const page = `${this.#home}/workspaces/${workspace.id}/members`;
    const name = member.user.name;
    const self = member.user.id === user.id;
    await this.confirm(ctx, user, csrfToken, {
      title: self ? `Make yourself ${article(role)} ${role}?` : `Make ${name} ${article(role)} ${role}?`,
      explanation: [
        `As ${article(role)} ${role} of ${workspace.name}, ${self ? 'you' : 'they'} ${ROLE_DESCRIPTIONS[role]}.`,
        ...(self && role !== 'admin' ? ['You will no longer be able to manage this workspace: another admin would have to make you one again.'] : []),
        `The applications ${self ? 'you' : 'they'} allowed keep working within what the new role allows, everywhere within seconds.`,
      ],
      facts: [
        { term: 'Name', text: name },
        { term: 'Email', text: member.user.email, email: true },
        { term: 'Role now', text: member.role },
        { term: 'New role', text: role },
      ],
      action: `${page}/${member.user.id}/role`,
      fields: { role },
      confirm: `Make ${self ? 'me' : 'them'} ${article(role)} ${role}`,
      cancel: { href: page, label: 'Keep the role as it is' },
    });
  }

  /** Removing a member from the workspace, asked once more. */
  async confirmRemoval(ctx: Context, user: User, workspace: WorkspaceRef, member: Member, csrfToken: string): Promise<void> {
    const page = `${this.#home}/workspaces/${workspace.id}/members`;
    const self = member.user.id === user.id;
    const name = self ? 'yourself' : member.user.name;
    await this.confirm(ctx, user, csrfToken, {
      title: `Remove ${name} from ${workspace.name}?`,
      explanation: [
        `${self ? 'You' : member.user.name} will no longer reach ${workspace.name}’s data: the applications ${self ? 'you' : 'they'} allowed for it lose their access at once.`,
        `${self ? 'Your' : 'Their'} account stays, with any other workspace ${self ? 'you belong' : 'they belong'} to. Only an admin can add ${self ? 'you' : 'them'} again.`,
      ],
      facts: [
        { term: 'Name', text: member.user.name },
        { term: 'Email', text: member.user.email, email: true },
        { term: 'Role', text: member.role },
      ],
      action: `${page}/${member.user.id}/remove`,
      fields: {},
      confirm: `Remove ${self ? 'me' : 'them'} from the workspace`,
      cancel: { href: page, label: self ? 'Stay in the workspace' : 'Keep them' },
    });
  }

  /** An admin's page of one workspace: its API keys (and the form to make one) and the clients bound to it. */
  async workspace(ctx: Context, user: User, workspace: WorkspaceRef, csrfToken: string, form: { done?: unknown } & Partial<ApiKeyFormRefusal>): Promise<void> {
    const [keys, clients, members] = await Promise.all([
      this.#deps.apiKeys.list(workspace.id), boundClients(this.#deps.clients, workspace.id), this.#deps.accounts.listMembers(workspace.id),
    ]);
    const page = `${this.#home}/workspaces/${workspace.id}`;
    await this.#render(ctx, 'settings_workspace', `${workspace.name}: API keys and applications`, user, {
      workspace,
      // The user is an admin (requireAdmin): the only one, or one of several.
      onlyAdmin: members.filter(({ role }) => role === 'admin').length <= 1,
      message: doneMessage(form.done),
      error: form.error,
      csrfToken,
      membersPage: `${page}/members`,
      createAction: `${page}/api-keys`,
      revokeAction: `${page}/api-keys/revoke`,
      name: form.name ?? '',
      // The field to fix has the focus, and names the error.
      field: form.field,
      maxNameLength: MAX_NAME_LENGTH,
      expiryChoices: EXPIRY_CHOICES,
      defaultExpiry: DEFAULT_EXPIRY,
      keys: keys.map(shownKey),
      // Each form shown makes at most one key: sent again (a reload), it creates none.
      formId: newFormId(),
      clients: clients.map((client) => ({ ...client, registered: shownTime(client.registeredAt) })),
    });
  }

  /** The new key, shown this once, with a copy button (public/settings.js; selectable by hand without it). */
  async keyCreated(ctx: Context, user: User, workspace: WorkspaceRef, { key, record }: NewApiKey): Promise<void> {
    await this.#render(ctx, 'settings_key_created', 'API key created', user, {
      workspace,
      key,
      created: shownKey(record),
      back: `${this.#home}/workspaces/${workspace.id}`,
    });
  }

  /** Revoking an application's access, asked once more. */
  async confirmAppRevocation(ctx: Context, user: User, app: ConnectedApp, csrfToken: string): Promise<void> {
    const workspace = app.workspaceId ? await this.#deps.accounts.getWorkspace(app.workspaceId) : undefined;
    await this.confirm(ctx, user, csrfToken, {
      title: `Revoke access of ${app.clientName}?`,
      explanation: [
        `${app.clientName} will no longer be able to use your account${workspace ? ` in ${workspace.name}` : ''}: the tokens it holds stop working at once.`,
        'To use it again, you would have to allow it again when it asks.',
      ],
      facts: [
        { term: 'Workspace', text: workspace?.name ?? 'A workspace you are no longer in' },
        { term: 'Can', text: app.access.join('; ') || 'Nothing beyond knowing who you are' },
        { term: 'Allowed', text: 'Unknown', time: shownTime(app.grantedAt) },
        { term: 'Last used', text: 'Not yet', time: shownTime(app.lastUsedAt) },
      ],
      action: `${this.#home}/applications/revoke`,
      fields: { grant: app.grantId },
      confirm: 'Revoke access',
      cancel: { href: this.#home, label: 'Keep its access' },
    });
  }

  /** Revoking one of a workspace's API keys, asked once more. */
  async confirmKeyRevocation(ctx: Context, user: User, workspace: WorkspaceRef, key: ApiKeyRecord, csrfToken: string): Promise<void> {
    const page = `${this.#home}/workspaces/${workspace.id}`;
    const shown = shownKey(key);
    await this.confirm(ctx, user, csrfToken, {
      title: `Revoke the API key “${key.name}”?`,
      explanation: [
        `Every script or service that uses this key is refused from then on, everywhere within seconds. A revoked key cannot be restored: to give access again, create a new key.`,
      ],
      facts: [
        { term: 'Workspace', text: workspace.name },
        { term: 'Key', text: `${shown.hint}…` },
        { term: 'Created', text: 'Unknown', time: shown.created },
        { term: 'Expires', text: 'Never', time: shown.expires },
        { term: 'Last used', text: 'Never', time: shown.lastUsed },
      ],
      action: `${page}/api-keys/revoke`,
      fields: { key: key.id },
      confirm: 'Revoke the key',
      cancel: { href: page, label: 'Keep the key' },
    });
  }

  /**
   * A confirmation page (views/settings_confirm.ejs). Its form carries an id of its own, by which a
   * second sending of it is answered as the first was (src/settings/sent_forms.ts).
   */
  async confirm(ctx: Context, user: User, csrfToken: string, confirmation: Confirmation): Promise<void> {
    const fields = { ...confirmation.fields, form_id: newFormId() };
    await this.#render(ctx, 'settings_confirm', confirmation.title, user, { ...confirmation, fields, csrfToken });
  }

  /** The admins who made these invitations, by user id: a member's email, or a former member's (no longer an admin, then). */
  async #inviters(invitations: Invitation[], members: Member[]): Promise<Map<string, Inviter>> {
    const inviters = new Map<string, Inviter>();
    for (const id of new Set(invitations.map(({ invitedBy }) => invitedBy))) {
      const member = members.find(({ user }) => user.id === id);
      const user = member?.user ?? await this.#deps.accounts.getUser(id);
      if (user) inviters.set(id, { email: user.email, admin: member?.role === 'admin' });
    }
    return inviters;
  }

  /**
   * Every settings page loads the settings script (public/settings.js: copy buttons, forms sent
   * once), named by its full URL in the page's `script-src`; each works without it.
   */
  async #render(ctx: Context, view: string, title: string, user: User, data: Record<string, unknown>): Promise<void> {
    const scriptUrl = `${this.#deps.issuer}${SETTINGS_PATH}${SETTINGS_SCRIPT_PATH}`;
    await renderPage(ctx, view, title, {
      ...data,
      settingsPage: true,
      settingsScript: scriptUrl,
      userEmail: user.email,
      home: this.#home,
      // Sign-out is the engine's RP-initiated logout page (src/interactions/logout.ts), as on the consent page.
      signOutUrl: `${this.#deps.basePath}${ENGINE_ROUTES.end_session}`,
    }, { formAction: [], scriptSrc: scriptUrl });
  }
}

/** The inviter as the members page names them, and whether their links still work (they are an admin of the workspace still). */
interface Inviter {
  email: string;
  admin: boolean;
}

function shownInvitation(invitation: Invitation, inviter: Inviter | undefined) {
  return {
    id: invitation.id,
    // Tells invitations of one role, one inviter and one minute apart, on the list and the link's page.
    shortId: shortId(invitation),
    role: invitation.role,
    invitedBy: inviter?.email ?? 'A deleted user',
    // Void: its link adds no one (src/settings/invitations.ts), which the list says.
    void: !inviter?.admin,
    created: shownTime(invitation.createdAt),
    expires: shownTime(invitation.expiresAt),
  };
}

function doneMessage(done: unknown): string | undefined {
  return typeof done === 'string' && Object.hasOwn(DONE, done) ? DONE[done] : undefined;
}

function shownKey(key: ApiKeyRecord) {
  return {
    id: key.id,
    name: key.name,
    hint: key.hint,
    created: shownTime(key.createdAt),
    expires: shownTime(key.expiresAt),
    lastUsed: shownTime(key.lastUsedAt),
  };
}
