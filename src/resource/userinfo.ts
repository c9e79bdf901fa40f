import type { Middleware } from 'koa';

import type { Accounts } from '../accounts/accounts.ts';
import { profileClaims } from '../accounts/profile.ts';
import { isUserToken, type AccessTokenVerifier } from '../oauth/jwt_access_tokens.ts';
import { bearerToken, refuseBearer } from './bearer.ts';

/**
 * The userinfo endpoint (OpenID Connect Core 5.3), for the product's JWT access tokens:
 * `sub` for a token with `openid`, the profile claims for a token with `profile`.
 */
export function userinfo(verifier: AccessTokenVerifier, accounts: Accounts): Middleware {
  return async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const token = bearerToken(ctx);
    if (!token) return refuseBearer(ctx, { status: 401, realm: 'oauth' });
    const claims = await verifier.verify(token);
    if (!claims) return refuseBearer(ctx, { status: 401, realm: 'oauth', error: 'invalid_token', description: 'the access token is invalid, expired or revoked' });

    const scopes = new Set((claims.scope ?? '').split(' '));
    if (!scopes.has('profile') && !scopes.has('openid')) {
      return refuseBearer(ctx, { status: 403, realm: 'oauth', error: 'insufficient_scope', description: 'the access token needs the profile scope', scope: 'profile' });
    }
    const user = isUserToken(claims) ? await accounts.getUser(claims.sub) : undefined;
    if (!user) return refuseBearer(ctx, { status: 401, realm: 'oauth', error: 'invalid_token', description: 'the access token is not tied to a user' });
    if (!scopes.has('profile')) {
      ctx.body = { sub: user.id };
      return;
    }
    const workspace = await accounts.membershipIn(user.id, claims.workspace_id);
    ctx.body = { sub: user.id, ...profileClaims(user, workspace) };
  };
}
