import type { Grant, KoaContextWithOIDC } from 'oidc-provider';

import { LIFETIMES } from '../../config/lifetimes.ts';
import { SETTINGS_CLIENT_ID, SETTINGS_SCOPE } from '../clients/first_party.ts';

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
    // Every request names the data API as its resource (resource_indicators.ts), which lists `openid` among
    // its scopes; a grant without it there would still get the consent page.
    for (const resource of Object.keys(ctx.oidc.resourceServers ?? {})) grant.addResourceScope(resource, SETTINGS_SCOPE);
    await grant.save();
    return grant;
  };
}
