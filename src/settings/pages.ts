import type { Context } from 'koa';

import type { ApiKeyRecord, ModelStore, Role, User } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';
import { renderPage } from '../pages/render.ts';
import { ENGINE_ROUTES } from '../engine/routes.ts';
import { MAX_NAME_LENGTH, type ApiKeys, type NewApiKey } from '../api_keys/api_keys.ts';
import { DEFAULT_EXPIRY, EXPIRY_CHOICES } from './api_key_form.ts';
import { COPY_SCRIPT_PATH } from './assets.ts';
import type { ConnectedApp, ConnectedApps } from './connected_apps.ts';
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
};

/** One line of what a confirmation page shows of the thing about to change: a time, or words. */
interface Fact {
  term: string;
  text: string;
  time?: ShownTime | undefined;
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

  /** Connected applications, and the user's workspaces (an admin's link to manage each). */
  async home(ctx: Context, user: User, done: unknown): Promise<void> {
    const { accounts, connectedApps } = this.#deps;
    const [workspaces, apps] = await Promise.all([accounts.workspacesOf(user.id), connectedApps.of(user.id)]);
    const names = new Map(workspaces.map(({ id, name }) => [id, name]));
    await this.#render(ctx, 'settings', 'Settings', user, {
      message: doneMessage(done),
      // Asks first: the form leads to a confirmation page (GET), so it carries no token.
      revokeAction: `${this.#home}/applications/revoke`,
      apps: await Promise.all(apps.map(async (app) => ({
        ...app,
        workspaceName: app.workspaceId ? names.get(app.workspaceId) ?? (await accounts.getWorkspace(app.workspaceId))?.name : undefined,
        granted: shownTime(app.grantedAt),
        lastUsed: shownTime(app.lastUsedAt),
      }))),
      workspaces: workspaces.map(({ id, name, role }) => ({ name, role, manage: role === 'admin' ? `${this.#home}/workspaces/${id}` : undefined })),
    });
  }

  /** An admin's page of one workspace: its API keys (and the form to make one) and the clients bound to it. */
  async workspace(ctx: Context, user: User, workspace: WorkspaceRef, csrfToken: string, form: { done?: unknown; error?: string; name?: string }): Promise<void> {
    const [keys, clients] = await Promise.all([this.#deps.apiKeys.list(workspace.id), boundClients(this.#deps.clients, workspace.id)]);
    const page = `${this.#home}/workspaces/${workspace.id}`;
    await this.#render(ctx, 'settings_workspace', `${workspace.name}: API keys and applications`, user, {
      workspace,
      message: doneMessage(form.done),
      error: form.error,
      csrfToken,
      createAction: `${page}/api-keys`,
      revokeAction: `${page}/api-keys/revoke`,
      name: form.name ?? '',
      maxNameLength: MAX_NAME_LENGTH,
      expiryChoices: EXPIRY_CHOICES,
      defaultExpiry: DEFAULT_EXPIRY,
      keys: keys.map(shownKey),
      clients: clients.map((client) => ({ ...client, registered: shownTime(client.registeredAt) })),
    });
  }

  /** The new key, shown this once, with a copy button (public/settings_copy.js; selectable by hand without it). */
  async keyCreated(ctx: Context, user: User, workspace: WorkspaceRef, { key, record }: NewApiKey): Promise<void> {
    const scriptUrl = `${this.#deps.issuer}${SETTINGS_PATH}${COPY_SCRIPT_PATH}`;
    await this.#render(ctx, 'settings_key_created', 'API key created', user, {
      workspace,
      key,
      created: shownKey(record),
      back: `${this.#home}/workspaces/${workspace.id}`,
      scriptUrl,
    }, scriptUrl);
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

  /** A confirmation page (views/settings_confirm.ejs). */
  async confirm(ctx: Context, user: User, csrfToken: string, confirmation: Confirmation): Promise<void> {
    await this.#render(ctx, 'settings_confirm', confirmation.title, user, { ...confirmation, csrfToken });
  }

  async #render(ctx: Context, view: string, title: string, user: User, data: Record<string, unknown>, scriptSrc?: string): Promise<void> {
    await renderPage(ctx, view, title, {
      ...data,
      settingsPage: true,
      userEmail: user.email,
      home: this.#home,
      // Sign-out is the engine's RP-initiated logout page (src/interactions/logout.ts), as on the consent page.
      signOutUrl: `${this.#deps.basePath}${ENGINE_ROUTES.end_session}`,
    }, { formAction: [], ...(scriptSrc ? { scriptSrc } : {}) });
  }
}

function doneMessage(done: unknown): string | undefined {
  return typeof done === 'string' ? DONE[done] : undefined;
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
