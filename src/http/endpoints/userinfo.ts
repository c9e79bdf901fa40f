import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import type { Provider } from 'oidc-provider';
import compose from 'koa-compose';

import type { Accounts } from '../../accounts/accounts.ts';
import { looksLikeApiKey } from '../../api_keys/format.ts';
import { PROFILE_CLAIM_NAMES, profileClaims, type ProfileClaims } from '../../accounts/profile.ts';
import { isUserToken, type AccessTokenVerifier } from '../../tokens/verifier.ts';
import { headerOrFormCredential, refusalOf, takenToken, type Refusal } from '../../resource/bearer.ts';
import { dpopChallenge, senderConstraintRefusal, type DpopPolicy } from '../../resource/sender_constraint.ts';
import { bearerCors } from '../../resource/cors.ts';
import type { FailedCredentials } from '../../rate_limits/limits.ts';
import { noStore } from '../../shared/no_store.ts';
import type { UserinfoSigner } from '../../tokens/signed_userinfo.ts';

/**
 * The userinfo endpoint (OpenID Connect Core 5.3), for the product's JWT access tokens:
 * `sub` for a token with `openid`, the profile claims for a token with `profile` or those its
 * authorization asked for by name (OpenID Connect Core 5.5). GET or POST,
 * with the token in the header or a POST's form body (RFC 6750 2.1, 2.2), callable from browsers
 * on any origin (OpenID Connect Core 5.3: it SHOULD support CORS; no cookies are involved).
 * A client that registered `userinfo_signed_response_alg` gets the same claims as a signed JWT
 * (`application/jwt`, OpenID Connect Core 5.3.2); the others get JSON. A DPoP-bound token comes
 * as `Authorization: DPoP` with its proof (RFC 9449), as at the data API.
 */
export function userinfo(deps: UserinfoDependencies): Middleware {
  return compose([bearerCors('GET, POST'), bodyParser({ enableTypes: ['form'], formLimit: '16kb' }) as Middleware, answer(deps)]);
}

export interface UserinfoDependencies {
  verifier: AccessTokenVerifier;
  /** The data API's identifier: userinfo takes the tokens issued for it. */
  audience: string;
  accounts: Accounts;
  signed: SignedResponses;
  failedCredentials: FailedCredentials;
  dpop: DpopPolicy;
}

/** What the endpoint needs for signed responses. */
export interface SignedResponses {
  /** The token's client's `userinfo_signed_response_alg`, or undefined when it wants JSON (userinfoSigningAlg). */
  algorithmFor: (clientId: string) => Promise<string | undefined>;
  sign: UserinfoSigner;
}

/**
 * The client's setting, read through the engine's client lookup: the client record cache
 * (src/clients/client_cache.ts) in front of the store, then the engine's own cache of built clients.
 */
export function userinfoSigningAlg(provider: Provider): SignedResponses['algorithmFor'] {
  return async (clientId) => (await provider.Client.find(clientId))?.userinfoSignedResponseAlg;
}

/** The `profile` scope releases every profile claim; otherwise only those asked for by name (the `claims` parameter). */
function releasedClaims(scopes: Set<string>, named: unknown): Set<string> {
  if (scopes.has('profile')) return new Set(PROFILE_CLAIM_NAMES);
  return new Set(Array.isArray(named) ? named.filter((name): name is string => typeof name === 'string') : []);
}

function pick(claims: ProfileClaims, names: Set<string>): Partial<ProfileClaims> {
  return Object.fromEntries(Object.entries(claims).filter(([name]) => names.has(name)));
}

const NO_USER = 'the access token is not tied to a user: userinfo describes the user an authorization code grant\'s token acts for';

function answer({ verifier, audience, accounts, signed, failedCredentials, dpop }: UserinfoDependencies): Middleware {
  const refusal = (refused: Omit<Refusal, 'realm' | 'dpop'>) => refusalOf({ realm: 'oauth', dpop: dpopChallenge(dpop), ...refused });
  return async (ctx) => {
    noStore(ctx);
    const credential = headerOrFormCredential(ctx, { description: 'an access token is required' });
    if (!('token' in credential)) throw refusal(credential);
    // Said plainly, since the data API takes one: a key acts for no user, so there is no one to describe. Not looked up, so nothing is learnt of it.
    if (looksLikeApiKey(credential.token)) {
      throw refusal({
        status: 401, error: 'invalid_token',
        description: 'API keys are not accepted here: userinfo needs an OAuth access token issued to a user, with the profile or openid scope',
      });
    }
    const taken = takenToken(await verifier.verify(credential.token), audience, 'userinfo');
    // A token that does not verify counts against the client address; one that does (for this API or
    // another) is never refused by that count.
    if (!('claims' in taken)) {
      const refused = refusal({ status: 401, error: 'invalid_token', description: taken.description });
      throw taken.forAnotherApi ? refused : await failedCredentials.refused(ctx, refused);
    }
    const { claims } = taken;
    const unbound = await senderConstraintRefusal(ctx, credential, claims, dpop);
    if (unbound) throw refusal(unbound);

    // Before the scope: no scope would give a client_credentials token a user, so none is asked for.
    if (!isUserToken(claims)) throw refusal({ status: 401, error: 'invalid_token', description: NO_USER });
    const scopes = new Set((claims.scope ?? '').split(' '));
    if (!scopes.has('profile') && !scopes.has('openid')) {
      throw refusal({ status: 403, error: 'insufficient_scope', description: 'the access token needs the profile scope', scope: 'profile' });
    }
    const user = await accounts.getUser(claims.sub);
    if (!user) throw refusal({ status: 401, error: 'invalid_token', description: NO_USER });
    const released = releasedClaims(scopes, claims.userinfo_claims);
    const workspace = released.has('workspace') ? await accounts.membershipIn(user.id, claims.workspace_id) : undefined;
    const body = { sub: user.id, ...pick(profileClaims(user, workspace), released) };
    const alg = await signed.algorithmFor(claims.client_id);
    if (!alg) {
      ctx.body = body;
      return;
    }
    // No nonce (OpenID Connect Core 5.3.2); iss and aud, and the access token's expiry, as the engine's own.
    ctx.body = await signed.sign(body, { alg, clientId: claims.client_id, expiresAt: claims.exp });
    ctx.type = 'application/jwt';
  };
}
