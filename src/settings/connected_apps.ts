import type { Provider } from 'oidc-provider';

import type { ModelPayload, ModelStore } from '../../adapters/store.ts';
import type { UserAccess } from '../engine/user_access.ts';
import type { GrantActivity } from '../grants/activity.ts';
import type { GrantWorkspaces } from '../grants/workspaces.ts';
import { SCOPE_DESCRIPTIONS, describeClaims } from '../pages/scope_descriptions.ts';
import { SETTINGS_CLIENT_ID } from '../clients/first_party.ts';
import { documentHost, isMetadataDocumentUrl } from '../clients/metadata_documents.ts';

/**
 * One application the user allowed for one workspace, as the settings page lists it: the grants
 * the user gave it there (one per browser it was allowed in), as one. Times in seconds since the epoch.
 */
export interface ConnectedApp {
  /** The newest of its grants: what the page's forms name. */
  grantId: string;
  /** Every grant it holds there; revoking the application revokes them all. */
  grantIds: string[];
  clientName: string;
  workspaceId: string | undefined;
  /** What the application may do, in words (the consent page's). */
  access: string[];
  grantedAt: number | undefined;
  lastUsedAt: number | undefined;
}

export interface ConnectedAppsDependencies {
  provider: Provider;
  /** The engine's Grant records, listed by user (ModelStore.listBy). */
  grants: ModelStore;
  grantWorkspaces: GrantWorkspaces;
  grantActivity: GrantActivity;
  /** Revokes a grant and everything issued under it, as the admin CLI does. */
  userAccess: UserAccess;
}

/**
 * The applications a user has allowed (the engine's grants of the user), and revoking one: its
 * refresh tokens, codes and grant are deleted, and its access tokens, which are JWTs never stored,
 * are refused from then on through the revocation list (`grant:` entry), on this instance at once
 * and on every other within 2 s, exactly as when a client revokes its refresh token (RFC 7009).
 */
export class ConnectedApps {
  readonly #deps: ConnectedAppsDependencies;

  constructor(deps: ConnectedAppsDependencies) {
    this.#deps = deps;
  }

  /**
   * The applications the user allowed, newest first: one per application and workspace, however
   * many browsers it was allowed in (each has a grant of its own); none of the settings area's own
   * sign-in, none of a client since deleted.
   */
  async of(accountId: string): Promise<ConnectedApp[]> {
    const records = await this.#deps.grants.listBy(accountId);
    const grants = (await Promise.all(records.map(({ id, payload }) => this.#describe(id, payload, accountId)))).filter((grant) => grant !== undefined);
    const apps = new Map<string, ConnectedApp>();
    for (const { clientId, ...grant } of grants.sort((a, b) => (b.grantedAt ?? 0) - (a.grantedAt ?? 0))) {
      const key = JSON.stringify([clientId, grant.workspaceId ?? null]);
      const app = apps.get(key);
      if (!app) {
        apps.set(key, { ...grant, grantIds: [grant.grantId] });
        continue;
      }
      app.grantIds.push(grant.grantId);
      app.access = [...new Set([...app.access, ...grant.access])];
      // grantedAt stays the newest grant's, the order's: when the user last allowed it.
      app.lastUsedAt = latest(app.lastUsedAt, grant.lastUsedAt);
    }
    return [...apps.values()];
  }

  /** The application the user allowed that holds this grant; undefined for someone else's grant, or one gone. */
  async find(accountId: string, grantId: string): Promise<ConnectedApp | undefined> {
    return (await this.of(accountId)).find((app) => app.grantIds.includes(grantId));
  }

  /**
   * Revokes the application that holds the user's grant, for that workspace: every grant it holds
   * there. False when the user has no such grant (someone else's, or gone).
   */
  async revoke(accountId: string, grantId: string): Promise<boolean> {
    const app = await this.find(accountId, grantId);
    if (!app) return false;
    for (const id of app.grantIds) await this.#revokeGrant(accountId, id);
    return true;
  }

  async #revokeGrant(accountId: string, grantId: string): Promise<void> {
    const grant = await this.#deps.provider.Grant.find(grantId);
    if (!grant || grant.accountId !== accountId || grant.clientId === SETTINGS_CLIENT_ID) return;
    await this.#deps.userAccess.revokeGrant(grantId);
  }

  async #describe(grantId: string, payload: ModelPayload, accountId: string): Promise<(Omit<ConnectedApp, 'grantIds'> & { clientId: string }) | undefined> {
    const clientId = typeof payload.clientId === 'string' ? payload.clientId : undefined;
    if (!clientId || clientId === SETTINGS_CLIENT_ID || payload.accountId !== accountId) return undefined;
    const document = isMetadataDocumentUrl(clientId);
    // A document that cannot be read right now does not hide the grant: its host names it.
    const client = await this.#deps.provider.Client.find(clientId).catch((error: unknown) => {
      if (document) return undefined;
      throw error;
    });
    // A deleted client's tokens are refused already (revocation list); nothing is left to revoke.
    if (!client && !document) return undefined;
    const [workspaceId, lastUsedAt] = await Promise.all([
      this.#deps.grantWorkspaces.workspaceOf(grantId),
      this.#deps.grantActivity.lastUsedAt(grantId),
    ]);
    return {
      grantId,
      clientId,
      clientName: document ? `${client?.clientName ? `${client.clientName}, at ` : ''}${documentHost(clientId)}` : client?.clientName || clientId,
      workspaceId,
      access: describeAccess(payload),
      grantedAt: typeof payload.iat === 'number' ? payload.iat : undefined,
      lastUsedAt,
    };
  }
}

function latest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.max(a, b);
}

/** The scopes (and claims asked for by name) a grant holds, described as the consent page did. */
function describeAccess(payload: ModelPayload): string[] {
  const openid = (payload.openid ?? {}) as { scope?: unknown; claims?: unknown };
  const resources = (payload.resources ?? {}) as Record<string, unknown>;
  const scopes = new Set<string>();
  for (const scope of [openid.scope, ...Object.values(resources)]) {
    if (typeof scope === 'string') for (const value of scope.split(' ').filter(Boolean)) scopes.add(value);
  }
  const described = [...scopes].map((scope) => SCOPE_DESCRIPTIONS[scope] ?? scope);
  const claims = Array.isArray(openid.claims) ? openid.claims.filter((claim): claim is string => typeof claim === 'string') : [];
  // Claims a scope covers already (profile) are not listed again; `sub` comes with every grant.
  const named = scopes.has('profile') ? [] : claims.filter((claim) => claim !== 'sub');
  if (named.length) described.push(describeClaims(named));
  return described;
}
