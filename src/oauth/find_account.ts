import type { FindAccount, KoaContextWithOIDC } from 'oidc-provider';

import type { Accounts } from '../accounts/accounts.ts';
import { profileClaims } from '../accounts/profile.ts';
import type { GrantWorkspaces } from './grant_workspaces.ts';

/** `findAccount`: the engine's view of a user; `profile` claims name the workspace of the grant at hand. */
export function findAccount(accounts: Accounts, grantWorkspaces: GrantWorkspaces): FindAccount {
  return async (ctx: KoaContextWithOIDC, sub: string) => {
    const user = await accounts.getUser(sub);
    if (!user) return undefined;
    return {
      accountId: user.id,
      async claims(_use: string, scope: string) {
        if (!scope.split(' ').includes('profile')) return { sub: user.id };
        const grantId = ctx.oidc.entities.Grant?.jti;
        const workspaceId = grantId ? await grantWorkspaces.workspaceOf(grantId) : undefined;
        const workspace = workspaceId ? await accounts.membershipIn(user.id, workspaceId) : undefined;
        return { sub: user.id, ...profileClaims(user, workspace) };
      },
    };
  };
}
