/**
 * Where the engine's endpoints live, relative to the issuer. Everything OAuth is under /oauth/;
 * the interaction (login and consent) pages are served by the host under /interaction/.
 */
export const ENGINE_ROUTES = {
  authorization: '/oauth/authorize',
  token: '/oauth/token',
  registration: '/oauth/register',
  jwks: '/oauth/jwks',
  revocation: '/oauth/revoke',
  introspection: '/oauth/introspect',
  end_session: '/oauth/logout',
  pushed_authorization_request: '/oauth/par',
  code_verification: '/oauth/device',
  device_authorization: '/oauth/device/auth',
  backchannel_authentication: '/oauth/backchannel',
  challenge: '/oauth/challenge',
} as const;

/** Served by the host, not the engine (the engine's userinfo only accepts tokens without an audience). */
export const USERINFO_PATH = '/oauth/userinfo';

export const INTERACTION_PATH = '/interaction';

const { authorization, token, registration, jwks, revocation, introspection, end_session: endSession, pushed_authorization_request: par } = ENGINE_ROUTES;
/** Where the engine publishes its metadata (OpenID Discovery), under the issuer's path. */
export const DISCOVERY_PATH = '/.well-known/openid-configuration';
/** The engine serves its metadata at both well-known paths (RFC 8414 and OpenID Discovery). */
export const OAUTH_DISCOVERY_PATH = '/.well-known/oauth-authorization-server';

/**
 * The engine's names for its routes (`ctx.oidc.route`; `cors.*` are their preflights), with the
 * paths they answer as templates, relative to the issuer: what the metrics count a request the
 * engine answered under. The names are oidc-provider's own (lib/helpers/initialize_app.js).
 */
export const ENGINE_ROUTE_TEMPLATES: Readonly<Record<string, string>> = {
  authorization,
  resume: `${authorization}/:uid`,
  token,
  'cors.token': token,
  jwks,
  'cors.jwks': jwks,
  discovery: DISCOVERY_PATH,
  'cors.discovery': DISCOVERY_PATH,
  registration,
  client: `${registration}/:clientId`,
  client_update: `${registration}/:clientId`,
  client_delete: `${registration}/:clientId`,
  revocation,
  'cors.revocation': revocation,
  introspection,
  'cors.introspection': introspection,
  pushed_authorization_request: par,
  'cors.pushed_authorization_request': par,
  end_session: endSession,
  end_session_confirm: `${endSession}/confirm`,
  end_session_success: `${endSession}/success`,
};

/** Every path the engine answers at, as a template relative to the issuer (src/http/exact_engine_paths.ts). */
export const ENGINE_PATH_TEMPLATES: readonly string[] = [...new Set([...Object.values(ENGINE_ROUTE_TEMPLATES), OAUTH_DISCOVERY_PATH, USERINFO_PATH])];
