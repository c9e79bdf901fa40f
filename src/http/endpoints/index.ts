import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { Provider } from 'oidc-provider';

import type { ModelStore } from '../../../adapters/store.ts';
import type { Accounts } from '../../accounts/accounts.ts';
import type { ProtectedResources } from '../../clients/protected_resources.ts';
import { DISCOVERY_PATH, ENGINE_ROUTES, USERINFO_PATH } from '../../engine/routes.ts';
import type { RateLimiting } from '../../rate_limits/limits.ts';
import { HttpError } from '../../shared/http_error.ts';
import type { LiveRoles } from '../../resource/live_roles.ts';
import type { UserinfoSigner } from '../../tokens/signed_userinfo.ts';
import type { AccessTokenVerifier } from '../../tokens/verifier.ts';
import { authorizationByPost, authorizationEndpoint } from './authorization.ts';
import { clientManagementEndpoint } from './client_management.ts';
import { introspectionEndpoint } from './introspection.ts';
import { logoutByPost, logoutEndpoint } from './logout.ts';
import { authorizationHeader } from './authorization_header.ts';
import { pushedAuthorizationEndpoint } from './pushed_authorization.ts';
import { registrationEndpoint } from './registration.ts';
import { revocationEndpoint } from './revocation.ts';
import { tokenEndpoint } from './token.ts';
import { userinfo, userinfoSigningAlg } from './userinfo.ts';
import type { DpopPolicy } from '../../resource/sender_constraint.ts';
import type { RefreshTokenRotations } from '../../engine/refresh_tokens.ts';
import type { PostedForms } from '../posted_forms.ts';
import { emptyFormIsNoParameters, unencodedBody } from '../request_body.ts';

export interface EndpointDependencies {
  issuer: string;
  basePath: string;
  provider: Provider;
  /** Refresh token rotations, completed by the token endpoint's last step. */
  rotations: RefreshTokenRotations;
  /** The APIs tokens are issued for. */
  resources: ProtectedResources;
  /** The data API's resource identifier: userinfo takes the data API's tokens. */
  audience: string;
  accounts: Accounts;
  clients: ModelStore;
  registrationAccessTokens: ModelStore;
  verifier: AccessTokenVerifier;
  /** A user's role now, for introspection as for the data API. */
  liveRoles: LiveRoles;
  rateLimits: RateLimiting;
  signUserinfo: UserinfoSigner;
  /** DPoP-bound tokens at userinfo, as at the data API. */
  dpop: DpopPolicy;
  /** Forms posted to the authorization and logout endpoints, kept for the GET that follows. */
  postedForms: PostedForms;
}

/**
 * The host's routes at the engine's endpoints: for each, the steps that run before and after the
 * engine, listed in that endpoint's file of this folder (token.ts: what runs before the engine's
 * token endpoint), and the userinfo endpoint, which the host serves itself (userinfo.ts). The
 * engine itself runs after these, mounted by the app (src/http/app.ts). The holding of error
 * redirects runs around the engine's authorization endpoint from the app too (authorization.ts).
 */
export function engineEndpoints(deps: EndpointDependencies): { routes: Middleware; handles: (path: string) => boolean } {
  const { issuer, basePath } = deps;
  const router = new Router({ prefix: basePath || undefined });
  for (const [path, methods] of METHODS) router.all(path, onlyMethods(methods));
  for (const path of [ENGINE_ROUTES.token, ENGINE_ROUTES.pushed_authorization_request, ENGINE_ROUTES.introspection, ENGINE_ROUTES.revocation, ENGINE_ROUTES.registration, `${ENGINE_ROUTES.registration}/:clientId`]) {
    router.all(path, authorizationHeader);
  }
  // The endpoints whose body the engine reads itself, as it comes (the pages' forms are read by the host, which decodes them).
  for (const path of [ENGINE_ROUTES.token, ENGINE_ROUTES.pushed_authorization_request, ENGINE_ROUTES.introspection, ENGINE_ROUTES.revocation]) router.post(path, unencodedBody, emptyFormIsNoParameters);
  router.post(ENGINE_ROUTES.registration, unencodedBody);
  router.put(`${ENGINE_ROUTES.registration}/:clientId`, unencodedBody);
  router.get(ENGINE_ROUTES.authorization, ...authorizationEndpoint(deps.postedForms));
  const posted = { forms: deps.postedForms, limit: deps.rateLimits.postedForms };
  router.post(ENGINE_ROUTES.authorization, authorizationByPost(posted, issuer, ENGINE_ROUTES.authorization));
  router.get(ENGINE_ROUTES.end_session, ...logoutEndpoint(deps.provider, `${basePath}${ENGINE_ROUTES.end_session}`, deps.postedForms));
  router.post(ENGINE_ROUTES.end_session, logoutByPost(posted, issuer, ENGINE_ROUTES.end_session));
  const registration = registrationEndpoint(deps);
  router.options(ENGINE_ROUTES.registration, registration.preflight);
  router.post(ENGINE_ROUTES.registration, ...registration.post);
  router.all(`${ENGINE_ROUTES.registration}/:clientId`, ...clientManagementEndpoint(deps.clients, deps.registrationAccessTokens));
  router.post(ENGINE_ROUTES.token, ...tokenEndpoint(deps));
  router.post(ENGINE_ROUTES.pushed_authorization_request, ...pushedAuthorizationEndpoint(deps.rateLimits, deps.provider));
  router.post(ENGINE_ROUTES.introspection, ...introspectionEndpoint(deps.verifier, deps.liveRoles, deps.rateLimits));
  router.post(ENGINE_ROUTES.revocation, ...revocationEndpoint(deps.verifier));
  const userinfoEndpoint = userinfo({
    verifier: deps.verifier, audience: deps.audience, accounts: deps.accounts, signed: { algorithmFor: userinfoSigningAlg(deps.provider), sign: deps.signUserinfo },
    failedCredentials: deps.rateLimits.failedCredentials, dpop: deps.dpop,
  });
  router.get(USERINFO_PATH, userinfoEndpoint);
  router.post(USERINFO_PATH, userinfoEndpoint);
  router.options(USERINFO_PATH, userinfoEndpoint);
  return { routes: router.routes() as Middleware, handles: routedPaths(basePath) };
}

/** The methods each endpoint takes (and OPTIONS, a browser's CORS preflight; HEAD with GET). */
const METHODS: ReadonlyArray<readonly [path: string, methods: readonly string[]]> = [
  ...[ENGINE_ROUTES.token, ENGINE_ROUTES.pushed_authorization_request, ENGINE_ROUTES.introspection, ENGINE_ROUTES.revocation, ENGINE_ROUTES.registration]
    .map((path) => [path, ['POST']] as const),
  [`${ENGINE_ROUTES.registration}/:clientId`, ['GET', 'PUT', 'DELETE']],
  [ENGINE_ROUTES.jwks, ['GET']],
  [USERINFO_PATH, ['GET', 'POST']],
  // The browser's endpoints: a POST is answered with 303 to the GET (form_post_as_get.ts).
  [ENGINE_ROUTES.authorization, ['GET', 'POST']],
  [ENGINE_ROUTES.end_session, ['GET', 'POST']],
  // The discovery document, also under its aliases, which src/http/discovery.ts rewrites to it.
  [DISCOVERY_PATH, ['GET']],
];

/**
 * Any other method gets 405 with `Allow`, as RFC 9126 section 2.3 asks of the PAR endpoint and
 * HTTP of every resource (RFC 9110 section 15.5.6); the engine's router would answer 404. So does
 * an OPTIONS that is no browser's preflight (no `Origin`), which only the engine's CORS answers:
 * here it is told the methods (RFC 9110 section 9.3.7).
 */
function onlyMethods(methods: readonly string[]): Middleware {
  const allowed = [...methods, ...(methods.includes('GET') ? ['HEAD'] : [])];
  const taken = new Set([...allowed, 'OPTIONS']);
  const withOptions = [...allowed, 'OPTIONS'].join(', ');
  return (ctx, next) => {
    if (ctx.method === 'OPTIONS' && !ctx.get('Origin')) {
      ctx.set('Allow', withOptions);
      ctx.status = 204;
      return;
    }
    if (taken.has(ctx.method)) return next();
    // The path asked for, before an alias was rewritten.
    const path = ctx.originalUrl.split('?')[0];
    throw new HttpError(405, 'invalid_request', `${path} takes ${methods.join(' and ')} requests only`, { Allow: allowed.join(', ') });
  };
}

/** The paths these routes answer or complete, so every other request passes them with one check. */
function routedPaths(basePath: string): (path: string) => boolean {
  const exact = new Set([
    ENGINE_ROUTES.authorization, ENGINE_ROUTES.end_session, ENGINE_ROUTES.registration, ENGINE_ROUTES.token, ENGINE_ROUTES.pushed_authorization_request,
    ENGINE_ROUTES.introspection, ENGINE_ROUTES.revocation, ENGINE_ROUTES.jwks, USERINFO_PATH, DISCOVERY_PATH,
  ]
    .map((path) => `${basePath}${path}`));
  const clientManagement = `${basePath}${ENGINE_ROUTES.registration}/`;
  return (path) => exact.has(path) || path.startsWith(clientManagement);
}
