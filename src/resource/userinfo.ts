import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import compose from 'koa-compose';

import type { Accounts } from '../accounts/accounts.ts';
import { profileClaims } from '../accounts/profile.ts';
import { isUserToken, type AccessTokenVerifier } from '../oauth/jwt_access_tokens.ts';
import { headerOrFormToken, refuseBearer, TwoTokensError } from './bearer.ts';
import { bearerCors } from './cors.ts';

/**
 * The userinfo endpoint (OpenID Connect Core 5.3), for the product's JWT access tokens:
 * `sub` for a token with `openid`, the profile claims for a token with `profile`. GET or POST,
 * with the token in the header or a POST's form body (RFC 6750 2.1, 2.2), callable from browsers
 * on any origin (OpenID Connect Core 5.3: it SHOULD support CORS; no cookies are involved).
 */
export function userinfo(verifier: AccessTokenVerifier, accounts: Accounts): Middleware {
  return compose([bearerCors('GET, POST'), bodyParser({ enableTypes: ['form'], formLimit: '16kb' }) as Middleware, answer(verifier, accounts)]);
}

function answer(verifier: AccessTokenVerifier, accounts: Accounts): Middleware {
  return async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    let token: string | undefined;
    try {
      token = headerOrFormToken(ctx);
    } catch (error) {
      if (!(error instanceof TwoTokensError)) throw error;
      ctx.status = 400;
      ctx.body = { error: 'invalid_request', error_description: error.message };
      return;
    }
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
