import { errors, type AccessToken, type ClientCredentials, type KoaContextWithOIDC } from 'oidc-provider';

import type { Accounts } from '../accounts/accounts.ts';
import { clientWorkspace } from '../clients/registration.ts';
import type { GrantWorkspaces } from '../grants/workspaces.ts';
import { grantReference } from '../tokens/revocation_list.ts';
import { grantedUserinfoClaims } from './requested_claims.ts';

/**
 * `extraTokenClaims`: the workspace every token acts in and, for a user's token, the user's role
 * there, read afresh at each issuance so a changed role or a removed member shows in the next token,
 * the reference to its grant (`gid`) that lets a revoked grant's tokens be refused, and the
 * userinfo claims its authorization asked for by name (`claims` parameter), when it did.
 */
export function workspaceClaims(accounts: Accounts, grantWorkspaces: GrantWorkspaces) {
  return async (ctx: KoaContextWithOIDC, token: AccessToken | ClientCredentials) => {
    if (token.kind === 'ClientCredentials') {
      const workspaceId = ctx.oidc.client && clientWorkspace(ctx.oidc.client);
      if (!workspaceId) throw new errors.UnauthorizedClient('this client is not bound to a workspace');
      return { workspace_id: workspaceId };
    }
    const { accountId, grantId } = token as AccessToken;
    const { AuthorizationCode: code, RefreshToken: refreshToken, Grant: grant } = ctx.oidc.entities;
    const workspaceId = grantId ? await grantWorkspaces.workspaceOf(grantId, code) : undefined;
    if (!grantId || !workspaceId) throw new errors.InvalidGrant('the grant names no workspace; authorize again');
    const role = await accounts.roleIn(accountId, workspaceId);
    if (!role) throw new errors.InvalidGrant('the user is no longer a member of the workspace this grant was for');
    // The engine leaves `claims` off tokens for a resource server; the code or refresh token has them.
    const userinfoClaims = grantedUserinfoClaims((code ?? refreshToken)?.claims, grant);
    return { workspace_id: workspaceId, role, gid: grantReference(grantId), ...(userinfoClaims.length ? { userinfo_claims: userinfoClaims } : {}) };
  };
}
