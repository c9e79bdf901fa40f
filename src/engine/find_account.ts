import type { FindAccount, KoaContextWithOIDC } from 'oidc-provider';

import type { Accounts } from '../accounts/accounts.ts';
import { profileClaims } from '../accounts/profile.ts';
import type { GrantWorkspaces } from '../grants/workspaces.ts';

/**
 * `findAccount`: the engine's view of a user. It offers every claim; the engine releases those the
 * scope and the `claims` parameter ask for and the grant allows. The workspace named is the grant's.
 */
export function findAccount(accounts: Accounts, grantWorkspaces: GrantWorkspaces): FindAccount {
  return async (ctx: KoaContextWithOIDC, sub: string) => {
    const user = await accounts.getUser(sub);
    if (!user) return undefined;
    return {
      accountId: user.id,
      async claims(_use: string, scope: string, requested: Record<string, unknown> = {}) {
        const wantsWorkspace = scope.split(' ').includes('profile') || 'workspace' in requested;
        if (!wantsWorkspace) return { sub: user.id, ...profileClaims(user) };
        const grantId = ctx.oidc.entities.Grant?.jti;
        const workspaceId = grantId ? await grantWorkspaces.workspaceOf(grantId, ctx.oidc.entities.AuthorizationCode) : undefined;
        const workspace = workspaceId ? await accounts.membershipIn(user.id, workspaceId) : undefined;
        return { sub: user.id, ...profileClaims(user, workspace) };
      },
    };
  };
}
