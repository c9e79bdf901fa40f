import type { Provider } from 'oidc-provider';

import type { Store } from '../../adapters/store.ts';
import { GrantWorkspaces } from '../grants/workspaces.ts';
import { storedId } from './records_at_rest.ts';

/** The id the store keeps an engine session under (a digest of the session's id, the cookie's value): what endSessions names. */
export function sessionStoreId(sessionId: string): string {
  return storedId('Session', sessionId);
}

/**
 * Ending what a user (or a workspace) was given through the engine: sign-in sessions and grants.
 * Used when a user is deleted or leaves a workspace, when a workspace is deleted, and when a
 * password change should sign out every other browser.
 *
 * - A session is the engine's record of a signed-in browser; deleting it signs that browser out
 *   at its next request, on every instance (sessions are read from the store each time).
 * - A grant is revoked as the settings area's connected applications revoke one: its refresh
 *   tokens and codes are deleted, and its access tokens, which are JWTs never stored, are refused
 *   through the revocation list (a `grant:` entry), on every instance within PROPAGATION_BOUND_MS.
 */
export class UserAccess {
  readonly #provider: Provider;
  readonly #store: Store;
  readonly #grantWorkspaces: GrantWorkspaces;

  /** The engine and what it was built with (OAuthServer's provider and grantWorkspaces). */
  constructor({ provider, store, grantWorkspaces }: { provider: Provider; store: Store; grantWorkspaces: GrantWorkspaces }) {
    this.#provider = provider;
    this.#store = store;
    this.#grantWorkspaces = grantWorkspaces;
  }

  /**
   * Deletes the user's sessions, except `keep` (the engine's id of the session to keep: the current
   * one); resolves how many ended. `before` is told the store ids of those about to end (digests of
   * their ids: sessionStoreId), to note why they did.
   */
  async endSessions(accountId: string, keep?: string, before?: (storeIds: readonly string[]) => Promise<void>): Promise<number> {
    const sessions = this.#store.model('Session');
    const kept = keep === undefined ? undefined : storedId('Session', keep);
    const ended = (await sessions.listBy(accountId)).filter(({ id }) => id !== kept);
    if (before && ended.length > 0) await before(ended.map(({ id }) => id));
    await Promise.all(ended.map(({ id }) => sessions.destroy(id)));
    return ended.length;
  }

  /**
   * Revokes the user's grants (with `workspaceId`, only those bound to that workspace), except
   * `keep` (a grant id); resolves how many were revoked.
   */
  async revokeGrants(accountId: string, { workspaceId, keep }: { workspaceId?: string; keep?: string } = {}): Promise<number> {
    const grants = (await this.#store.model('Grant').listBy(accountId)).map(({ id }) => id).filter((id) => id !== keep);
    const revoked = workspaceId === undefined
      ? grants
      : (await Promise.all(grants.map(async (id) => (await this.#grantWorkspaces.workspaceOf(id)) === workspaceId ? id : undefined))).filter((id) => id !== undefined);
    for (const grantId of revoked) await this.revokeGrant(grantId);
    return revoked.length;
  }

  /** Revokes every grant bound to the workspace (whoever gave it); resolves how many were revoked. */
  async revokeWorkspaceGrants(workspaceId: string): Promise<number> {
    const bound = await this.#store.model(GrantWorkspaces.MODEL).listBy(workspaceId);
    for (const { id } of bound) await this.revokeGrant(id);
    return bound.length;
  }

  /** Revokes one grant and everything issued under it. */
  async revokeGrant(grantId: string): Promise<void> {
    const provider = this.#provider;
    // Access tokens first: their revocation-list entry refuses them before anything else changes.
    await provider.AccessToken.revokeByGrantId(grantId);
    await Promise.all([provider.RefreshToken.revokeByGrantId(grantId), provider.AuthorizationCode.revokeByGrantId(grantId)]);
    // The grant last; its workspace binding and last use go with it (src/engine/adapter.ts).
    const grant = await provider.Grant.find(grantId);
    await (grant ? grant.destroy() : provider.Grant.adapter.destroy(grantId));
  }
}
