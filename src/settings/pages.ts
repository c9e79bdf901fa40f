import type { Context } from 'koa';

import type { ApiKeyRecord, ModelStore, Role, User } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';
import { renderPage } from '../pages/render.ts';
import { ENGINE_ROUTES } from '../engine/routes.ts';
import { MAX_NAME_LENGTH, type ApiKeys, type NewApiKey } from '../api_keys/api_keys.ts';
import { DEFAULT_EXPIRY, EXPIRY_CHOICES } from './api_key_form.ts';
import { COPY_SCRIPT_PATH } from './assets.ts';
import type { ConnectedApps } from './connected_apps.ts';
import { SETTINGS_PATH } from '../clients/first_party.ts';
import { shownTime } from './times.ts';
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

/** The settings area's three pages, rendered in the pages' layout (views/settings*.ejs). */
export class SettingsPages {
  readonly #deps: PagesDependencies;
  readonly #home: string;

  constructor(deps: PagesDependencies) {
    this.#deps = deps;
    this.#home = `${deps.basePath}${SETTINGS_PATH}`;
  }

  /** Connected applications, and the user's workspaces (an admin's link to manage each). */
  async home(ctx: Context, user: User, csrfToken: string, done: unknown): Promise<void> {
    const { accounts, connectedApps } = this.#deps;
    const [workspaces, apps] = await Promise.all([accounts.workspacesOf(user.id), connectedApps.of(user.id)]);
    const names = new Map(workspaces.map(({ id, name }) => [id, name]));
    await this.#render(ctx, 'settings', 'Settings', user, {
      message: doneMessage(done),
      csrfToken,
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
