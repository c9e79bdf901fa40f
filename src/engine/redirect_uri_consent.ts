import type { Client, Grant, KoaContextWithOIDC } from 'oidc-provider';

import { LOOPBACK_HOSTS } from '../../config/parsers.ts';
import { isMetadataDocumentUrl, type MetadataDocuments, type RedirectUriHistory } from '../clients/metadata_documents.ts';
import { redirectUrisAddedAt } from '../clients/registration.ts';
import { nowSeconds } from '../shared/clock.ts';

/**
 * Consent reaches only the redirect URIs the client had when the user gave it. A client can add
 * redirect URIs itself (an RFC 7592 update; a new version of its metadata document), and must not
 * thereby have codes for an account that consented before sent to the new ones without the user
 * seeing where they go.
 *
 * This is the engine's `loadExistingGrant`: the grant the browser session remembers for the client
 * is reused only when it was given after the request's redirect_uri was added. Otherwise the engine
 * finds no grant, asks for consent as for a client never authorized, and the consent page names
 * the application's redirect target; the grant saved then covers the new URI from then on. A grant
 * the user has just given on the consent page (the interaction's result) is used as it is.
 */
export function loadConsentedGrant(documents: MetadataDocuments | undefined): (ctx: KoaContextWithOIDC) => Promise<Grant | undefined> {
  return async (ctx) => {
    const { provider, client, session, params, result } = ctx.oidc;
    const consented = result?.consent?.grantId;
    if (consented) return provider.Grant.find(consented);
    if (!client || !session) return undefined;
    const grantId = session.grantIdFor(client.clientId);
    if (!grantId) return undefined;
    const grant = await provider.Grant.find(grantId);
    const redirectUri = params?.redirect_uri;
    if (!grant || typeof redirectUri !== 'string') return grant;
    const covered = documents && isMetadataDocumentUrl(client.clientId)
      ? documentConsentCovers(client, redirectUri, grant.iat, await documents.redirectUriHistory(client.clientId))
      : consentCovers(client, redirectUri, grant.iat);
    return covered ? grant : undefined;
  };
}

/** Whether consent given at `consentedAt` (seconds) covers `redirectUri`, one the client has registered. */
function consentCovers(client: Client, redirectUri: string, consentedAt: number | undefined): boolean {
  const addedAt = whenAdded(client, redirectUri, redirectUrisAddedAt(client));
  // Within the same second, the order is unknown: the user is asked.
  return addedAt === 0 || (consentedAt !== undefined && consentedAt > addedAt);
}

/**
 * The same for a client whose metadata document lists `redirectUri`: a URI listed since the
 * history began is covered by consent given since then (consent needs the document, so it cannot
 * come before the fetch that began it, even within its second); one a later version added, by
 * consent given after it was first seen. Nothing known (no copy in the store): the user is asked.
 */
function documentConsentCovers(client: Client, redirectUri: string, consentedAt: number | undefined, history: RedirectUriHistory | undefined): boolean {
  if (!history || consentedAt === undefined) return false;
  const addedAt = whenAdded(client, redirectUri, history.addedAt);
  return addedAt === 0 ? consentedAt >= history.since : consentedAt > addedAt;
}

/**
 * When the registered URI that `redirectUri` matches was added, by `added` (0: registered with the client, or listed since the document's history began). A
 * native client's loopback URI matches whatever its port (RFC 8252 7.3), so it is the earliest of
 * the registered URIs it matches; one that matches none is taken as added now.
 */
function whenAdded(client: Client, redirectUri: string, added: Readonly<Record<string, number>>): number {
  const registered = client.redirectUris ?? [];
  if (registered.includes(redirectUri)) return added[redirectUri] ?? 0;
  const withoutPort = loopbackWithoutPort(redirectUri);
  const matches = withoutPort === undefined ? [] : registered.filter((uri) => loopbackWithoutPort(uri) === withoutPort);
  return matches.length ? Math.min(...matches.map((uri) => added[uri] ?? 0)) : nowSeconds();
}

function loopbackWithoutPort(uri: string): string | undefined {
  const url = URL.parse(uri);
  if (!url || url.protocol !== 'http:' || !LOOPBACK_HOSTS.has(url.hostname)) return undefined;
  url.port = '';
  return url.href;
}
