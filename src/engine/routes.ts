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
