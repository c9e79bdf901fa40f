import type { ClientMetadata } from 'oidc-provider';

/**
 * How the settings area signs a visitor in: with the engine's own session, through a normal
 * authorization request of this built-in first-party client, whose redirect lands back on the
 * settings area (src/settings/sign_in.ts).
 *
 * oidc-provider v9 has no supported way to create a session from outside an interaction (the old
 * `setProviderSession` is gone), and re-implementing its login would give the service two
 * sign-ins. So a visitor without a session is sent through the same login page an application's
 * user sees; the engine sets its session cookie (`_session`) on the way, and the settings pages
 * read that session with `provider.Session.get(ctx)` (the engine's documented way for a page of
 * the provider's own site). Signing in here signs in for the authorization pages too, and the
 * other way round; signing out (RP-initiated logout) ends both.
 *
 * The client is static (configuration, never stored), public, and may only send its codes to the
 * settings area, which deletes each one unredeemed: the session is all it is for. It never gets a
 * token either way: it may ask for `openid` alone, it is never shown a consent page (one asked for
 * is refused: src/interactions/router.ts), so its grant never names a workspace, and a grant
 * without a workspace is refused every access token (src/engine/token_claims.ts). Its grant is
 * made on the spot: src/engine/first_party_grant.ts.
 */
export const SETTINGS_CLIENT_ID = 'settings';
export const SETTINGS_PATH = '/settings';
export const CALLBACK_PATH = `${SETTINGS_PATH}/callback`;
/**
 * Why a settings page sent the browser to sign in, when its session cookie named a session that
 * had ended: a cookie the settings sign-in sets for the login page (src/settings/sign_in.ts), which
 * says so to the person (src/interactions/login.ts). Signed; its value is one of these words.
 */
export const SIGNED_OUT_COOKIE = 'settings_signed_out';
export type SignedOutReason = 'password-changed' | 'session-ended';

/** The only scope it asks for: signing in is all the settings area needs. */
export const SETTINGS_SCOPE = 'openid';

export function settingsClient(issuer: string): ClientMetadata {
  return {
    client_id: SETTINGS_CLIENT_ID,
    // The name the sign-in page shows ("to continue to Settings"): the settings pages' own heading.
    client_name: 'Settings',
    redirect_uris: [`${issuer}${CALLBACK_PATH}`],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    // The engine refuses it any other scope (invalid_scope).
    scope: SETTINGS_SCOPE,
  };
}
