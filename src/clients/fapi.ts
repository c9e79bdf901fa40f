import { errors, type Client, type KoaContextWithOIDC, type Provider } from 'oidc-provider';

import { refusedSignedAssertion } from './client_assertions.ts';
import { SETTINGS_CLIENT_ID } from './first_party.ts';
import { isMetadataDocumentUrl } from './metadata_documents.ts';

/**
 * FAPI 2.0 Security Profile clients: clients an operator vetted for it (registered with an initial
 * access token created with `--fapi`), or, with FAPI=on, every client that obtains tokens.
 *
 * The engine's `features.fapi` profile ('2.0') does its part for such a client: the authorization
 * request must name its `redirect_uri`, a client assertion's audience must be the issuer. This
 * file adds what the profile asks of the client's registration and of its client assertions,
 * which the engine leaves to the deployment:
 * - `private_key_jwt`, signed with PS256, ES256 or EdDSA (FAPI 2.0 5.4, 5.3.1.2): no shared
 *   secret and no public client; request objects, when it sends them, signed with the same three;
 * - every authorization request pushed first (PAR, 5.3.1.2): `require_pushed_authorization_requests`;
 * - sender-constrained access tokens (5.3.1.1), here DPoP: `dpop_bound_access_tokens`;
 * - ID tokens and signed userinfo in an algorithm the profile allows (ES256, the one of the three
 *   this server's keys sign).
 * PKCE S256 is required by src/engine/pkce.ts; authorization codes live 60 s for every client
 * (config/lifetimes.ts), the profile's longest; `iss` is in every authorization response.
 */

/** The client metadata an operator's `--fapi` initial access token sets; kept by the server, never taken from a request. */
export const FAPI_METADATA = 'fapi_profile';
/** The one value it takes, the engine's name for the profile. */
export const FAPI_2_0 = '2.0';
/** The algorithms FAPI 2.0 allows (section 5.4.1): for client assertions, request objects, ID tokens and signed userinfo. */
export const FAPI_SIGNING_ALGORITHMS: readonly string[] = ['PS256', 'ES256', 'EdDSA'];
/** Of those, the one this server signs with (its P-256 key). */
const SERVER_SIGNING_ALGORITHM = 'ES256';
/** FAPI 2.0 5.3.2.1: an authorization code lives at most 60 seconds. */
export const FAPI_CODE_LIFETIME_MAX = 60;

type Metadata = Record<string, unknown>;

/** Whether FAPI 2.0 applies to a client with this metadata. */
function appliesTo(metadata: Metadata, everyClient: boolean): boolean {
  // The settings area's own sign-in client never gets a token (src/clients/first_party.ts).
  if (metadata.client_id === SETTINGS_CLIENT_ID) return false;
  if (metadata[FAPI_METADATA] === FAPI_2_0) return true;
  // A resource server an operator registered only introspects: it has no grant type.
  return everyClient && Array.isArray(metadata.grant_types) && metadata.grant_types.length > 0;
}

const profiles = new WeakMap<Client, boolean>();

/**
 * The engine's `features.fapi.profile`: '2.0' for a FAPI client. Kept per engine Client instance
 * (the engine reuses one while its record is unchanged): `metadata()` rebuilds the whole record.
 */
export function fapiProfile(everyClient: boolean): (ctx: KoaContextWithOIDC, client?: Client) => '2.0' | undefined {
  return (_ctx, client) => (client && isFapiClient(client, everyClient) ? FAPI_2_0 : undefined);
}

const policies = new WeakMap<Provider, boolean>();

/** Keeps, for the host's steps in front of the engine, whether FAPI=on holds every client of this provider to the profile. */
export function holdFapiPolicy(provider: Provider, everyClient: boolean): void {
  policies.set(provider, everyClient);
}

/** Whether the provider holds the client to FAPI 2.0 (an operator made it a FAPI client, or FAPI=on). */
export function isFapiClientOf(provider: Provider, client: Client): boolean {
  return isFapiClient(client, policies.get(provider) ?? false);
}

export function isFapiClient(client: Client, everyClient: boolean): boolean {
  let fapi = profiles.get(client);
  if (fapi === undefined) {
    fapi = appliesTo(client.metadata() as Metadata, everyClient);
    profiles.set(client, fapi);
  }
  return fapi;
}

/**
 * Part of the engine's `extraClientMetadata.validator`, for the FAPI_METADATA key. The property
 * comes only from the operator: a registration has it when its initial access token was made with
 * `--fapi` (ctx.state.registrationFapi), an RFC 7592 update keeps the client's, a metadata document
 * never has it, a stored client keeps what was stored. Then, for a FAPI client, the profile's rules:
 * what a request asks against them is refused (`invalid_client_metadata`); what the profile
 * requires is set (PAR, DPoP, ES256), at registration and each time a stored client is loaded, so
 * a client stored before FAPI=on is held to it too. A stored client that cannot be (a shared
 * secret, a public client) still loads, so its pages and its grants in the settings area still
 * show; its token requests are refused (src/http/endpoints/fapi_clients.ts).
 */
export function applyFapiProfile(ctx: KoaContextWithOIDC | undefined, key: string, metadata: Metadata, everyClient: boolean): void {
  if (key !== FAPI_METADATA) return;
  const route = ctx?.oidc?.route;
  const fromRequest = route === 'registration' || route === 'client_update';
  if (isMetadataDocumentUrl(metadata.client_id)) delete metadata[FAPI_METADATA];
  else if (route === 'registration') setOrDelete(metadata, ctx?.state.registrationFapi === true);
  else if (route === 'client_update') setOrDelete(metadata, ctx?.oidc.client !== undefined && ctx.oidc.client.metadata()[FAPI_METADATA] === FAPI_2_0);
  if (!appliesTo(metadata, everyClient)) return;

  const requested = fromRequest ? (ctx?.oidc.body as Metadata | undefined) ?? {} : {};
  const refuse = (description: string): void => {
    if (fromRequest) throw new errors.InvalidClientMetadata(description);
  };
  if (metadata.token_endpoint_auth_method !== 'private_key_jwt') refuse(fapiAuthMethodRule(metadata.token_endpoint_auth_method));
  for (const [field, what] of [['token_endpoint_auth_signing_alg', 'client assertions'], ['request_object_signing_alg', 'request objects']] as const) {
    const algorithm = metadata[field];
    if (algorithm !== undefined && !FAPI_SIGNING_ALGORITHMS.includes(String(algorithm))) {
      refuse(`a FAPI 2.0 client signs its ${what} with ${FAPI_SIGNING_ALGORITHMS.join(', ')}; ${field} ${String(algorithm)} is not allowed`);
    }
  }
  for (const field of ['id_token_signed_response_alg', 'userinfo_signed_response_alg']) {
    const algorithm = metadata[field];
    if (algorithm === undefined || algorithm === SERVER_SIGNING_ALGORITHM) continue;
    // The engine's default (RS256) becomes the profile's; one the request asked for is refused,
    // in the profile's words rather than the engine's list, which names RS256.
    if (requested[field] !== undefined) refuse(`a FAPI 2.0 client's ${field} is ${SERVER_SIGNING_ALGORITHM}, the one algorithm this server signs with that FAPI 2.0 allows (${FAPI_SIGNING_ALGORITHMS.join(', ')}); ${String(algorithm)} is not allowed`);
    metadata[field] = SERVER_SIGNING_ALGORITHM;
  }
  if (requested.require_pushed_authorization_requests === false) refuse('a FAPI 2.0 client pushes every authorization request (PAR); require_pushed_authorization_requests cannot be false');
  if (requested.dpop_bound_access_tokens === false) refuse('a FAPI 2.0 client gets DPoP-bound access tokens only; dpop_bound_access_tokens cannot be false');
  metadata.require_pushed_authorization_requests = true;
  metadata.dpop_bound_access_tokens = true;
}

/** What a FAPI client is told when it does not use private_key_jwt. */
export function fapiAuthMethodRule(method: unknown): string {
  return `a FAPI 2.0 client authenticates with private_key_jwt (its public keys in jwks); token_endpoint_auth_method ${String(method)} is not allowed`;
}

function setOrDelete(metadata: Metadata, fapi: boolean): void {
  if (fapi) metadata[FAPI_METADATA] = FAPI_2_0;
  else delete metadata[FAPI_METADATA];
}

/**
 * Part of the engine's request object checks (`assertJwtClaimsAndHeader`): a FAPI client's
 * request object is signed with an algorithm the profile allows, whatever its registration says.
 */
export function fapiRequestObjectAlgorithm(header: { alg?: unknown }, client: Client, everyClient: boolean): void {
  const refusal = fapiAlgorithmRefusal(header, client, everyClient, 'request objects');
  if (refusal) throw new errors.InvalidRequestObject(refusal);
}

/**
 * Part of the engine's `assertJwtClientAuthClaimsAndHeader`: a FAPI client's assertion is signed
 * with an algorithm the profile allows, whatever its registration says (a client registered with
 * no `token_endpoint_auth_signing_alg` may use any the server accepts).
 */
export function fapiAssertionAlgorithm(header: { alg?: unknown }, client: Client, everyClient: boolean): void {
  const refusal = fapiAlgorithmRefusal(header, client, everyClient, 'client assertion');
  if (refusal) throw refusedSignedAssertion(refusal);
}

/** Why a FAPI client's JWT (`what` it is) may not be taken for its algorithm; undefined when it may, or the client is no FAPI client. */
function fapiAlgorithmRefusal(header: { alg?: unknown }, client: Client, everyClient: boolean, what: string): string | undefined {
  if (!isFapiClient(client, everyClient) || FAPI_SIGNING_ALGORITHMS.includes(String(header.alg))) return undefined;
  return `a FAPI 2.0 client signs its ${what} with ${FAPI_SIGNING_ALGORITHMS.join(', ')}; ${String(header.alg)} is not allowed`;
}
