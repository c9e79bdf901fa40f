import type { ClientMetadata, Grant, KoaContextWithOIDC } from 'oidc-provider';

import { LIFETIMES } from '../../config/lifetimes.ts';

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
 * token either way: a grant without a workspace is refused every access token (access_tokens.ts).
 */
export const SETTINGS_CLIENT_ID = 'settings';
export const SETTINGS_PATH = '/settings';
export const CALLBACK_PATH = `${SETTINGS_PATH}/callback`;
/** The only scope it asks for: signing in is all the settings area needs. */
export const SETTINGS_SCOPE = 'openid';

export function settingsClient(issuer: string): ClientMetadata {
  return {
    client_id: SETTINGS_CLIENT_ID,
    client_name: 'Account settings',
    redirect_uris: [`${issuer}${CALLBACK_PATH}`],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

/**
 * The engine's `loadExistingGrant`, extended with the engine's recipe for a first-party client
 * (no consent page): the settings client's sign-in gets a grant of `openid` made on the spot, once
 * per browser session (the session remembers it), and living no longer than a session does.
 * Every other client's grant is what `loadExisting` finds.
 */
export function withSettingsSignIn(loadExisting: (ctx: KoaContextWithOIDC) => Promise<Grant | undefined>) {
  return async (ctx: KoaContextWithOIDC): Promise<Grant | undefined> => {
    const existing = await loadExisting(ctx);
    const { client, session, provider } = ctx.oidc;
    if (existing || client?.clientId !== SETTINGS_CLIENT_ID || !session?.accountId) return existing;
    const init = { clientId: SETTINGS_CLIENT_ID, accountId: session.accountId, expiresIn: LIFETIMES.Session };
    const grant = new provider.Grant(init as ConstructorParameters<typeof provider.Grant>[0]);
    grant.addOIDCScope(SETTINGS_SCOPE);
    // Every request names the data API as its resource (access_tokens.ts), which lists `openid` among
    // its scopes; a grant without it there would still get the consent page.
    for (const resource of Object.keys(ctx.oidc.resourceServers ?? {})) grant.addResourceScope(resource, SETTINGS_SCOPE);
    await grant.save();
    return grant;
  };
}
