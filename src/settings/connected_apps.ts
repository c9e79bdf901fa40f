import type { Provider } from 'oidc-provider';

import type { ModelPayload, ModelStore } from '../../adapters/store.ts';
import type { GrantActivity } from '../grants/activity.ts';
import type { GrantWorkspaces } from '../grants/workspaces.ts';
import { SCOPE_DESCRIPTIONS, describeClaims } from '../pages/scope_descriptions.ts';
import { SETTINGS_CLIENT_ID } from '../clients/first_party.ts';
import { documentHost, isMetadataDocumentUrl } from '../clients/metadata_documents.ts';

/** One application the user allowed, as the settings page lists it. Times in seconds since the epoch. */
export interface ConnectedApp {
  grantId: string;
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

  /** The user's grants, newest first; none of the settings area's own sign-in, none of a client since deleted. */
  async of(accountId: string): Promise<ConnectedApp[]> {
    const records = await this.#deps.grants.listBy(accountId);
    const apps = await Promise.all(records.map(({ id, payload }) => this.#describe(id, payload, accountId)));
    return apps.filter((app) => app !== undefined).sort((a, b) => (b.grantedAt ?? 0) - (a.grantedAt ?? 0));
  }

  /** One application the user allowed, by its grant; undefined for someone else's grant, or one gone. */
  async find(accountId: string, grantId: string): Promise<ConnectedApp | undefined> {
    return (await this.of(accountId)).find((app) => app.grantId === grantId);
  }

  /** Revokes the user's grant; false when the user has no such grant (someone else's, or gone). */
  async revoke(accountId: string, grantId: string): Promise<boolean> {
    const { provider } = this.#deps;
    const grant = await provider.Grant.find(grantId);
    if (!grant || grant.accountId !== accountId || grant.clientId === SETTINGS_CLIENT_ID) return false;
    // Access tokens first: their revocation-list entry refuses them before anything else changes.
    await provider.AccessToken.revokeByGrantId(grantId);
    await Promise.all([provider.RefreshToken.revokeByGrantId(grantId), provider.AuthorizationCode.revokeByGrantId(grantId)]);
    // Its workspace binding and last use go with it (src/engine/adapter.ts).
    await grant.destroy();
    return true;
  }

  async #describe(grantId: string, payload: ModelPayload, accountId: string): Promise<ConnectedApp | undefined> {
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
      clientName: document ? `${client?.clientName ? `${client.clientName}, at ` : ''}${documentHost(clientId)}` : client?.clientName || clientId,
      workspaceId,
      access: describeAccess(payload),
      grantedAt: typeof payload.iat === 'number' ? payload.iat : undefined,
      lastUsedAt,
    };
  }
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
