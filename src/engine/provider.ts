import Provider, { type Client, type Configuration, type KoaContextWithOIDC, type SigningAlgorithm } from 'oidc-provider';
import { defaults as engineDefaults } from 'oidc-provider/lib/helpers/defaults.js';

import type { Store } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';
import { PROFILE_CLAIM_NAMES } from '../accounts/profile.ts';
import type { Config } from '../../config/index.ts';
import { DOCUMENT_DEFAULTS_BYTES, MetadataDocuments } from '../clients/metadata_documents.ts';
import { ProtectedResources } from '../clients/protected_resources.ts';
import { REGISTRATION_BODY_MAX } from '../clients/registration_hygiene.ts';
import { safeFetch } from '../shared/safe_fetch.ts';
import { apiAudience, builtInResources, resourceIndicators } from './resource_indicators.ts';
import { workspaceClaims } from './token_claims.ts';
import { ACR_VALUES } from './authentication_context.ts';
import { proofCheckedBeforeCodeIsUsed } from './dpop_bound_codes.ts';
import { proofBindsPublicClientRefreshTokens } from './dpop_bound_refresh_tokens.ts';
import { codeRedemptionRacesRevokeTheGrant } from './concurrent_code_redemptions.ts';
import { refusalsHeldUntilRedemption, refusedUnlessRotated } from './refusals_at_redemption.ts';
import { registerClientCredentialsGrant } from './grants/client_credentials.ts';
import { assertionsUsedOnce, assertionTimesAreBounded, audienceIsTheIssuer } from '../clients/client_assertions.ts';
import { requirePushedRequests } from '../clients/pushed_requests.ts';
import { FAPI_METADATA, applyFapiProfile, fapiAssertionAlgorithm, fapiProfile, fapiRequestObjectAlgorithm, holdFapiPolicy, isFapiClient } from '../clients/fapi.ts';
import { newClientId } from '../clients/client_ids.ts';
import { browserOriginAllowed } from '../clients/browser_origins.ts';
import { useHashedClientSecrets } from '../clients/client_secrets.ts';
import { cookieNames } from './cookie_names.ts';
import { engineAdapterFactory } from './adapter.ts';
import { findAccount } from './find_account.ts';
import { GrantActivity } from '../grants/activity.ts';
import { GrantWorkspaces } from '../grants/workspaces.ts';
import { countedInitialAccessTokens } from '../clients/initial_access_tokens.ts';
import { introspectionAllowedPolicy } from '../tokens/introspection_policy.ts';
import { revocationAllowedPolicy } from '../tokens/revocation_policy.ts';
import type { KeyMaterial } from '../keys/keys.ts';
import { LIFETIMES, sessionLifetime } from '../../config/lifetimes.ts';
import { pkceRequired } from './pkce.ts';
import { RecordsAtRest } from './records_at_rest.ts';
import { findClientsOncePerRequest } from './clients_per_request.ts';
import { RefreshTokenRotations, RefreshTokenValues, refreshTokenLifetime, refreshTokensNameTheirGrant, rotatesRefreshTokens } from './refresh_tokens.ts';
import { loadConsentedGrant } from './redirect_uri_consent.ts';
import { INTROSPECTION_AUDIENCE, keepOperatorIntrospectionAudience } from '../clients/resource_servers.ts';
import type { NewInteractionLimit, NewMetadataDocumentLimit } from '../rate_limits/limits.ts';
import { allowMetadataDocumentFetch } from './new_metadata_documents.ts';
import type { RevocationList } from '../tokens/revocation_list.ts';
import { DPOP_NONCE_PURPOSE } from '../tokens/dpop_nonces.ts';
import { DPOP_SIGNING_ALGORITHMS } from '../tokens/dpop_proofs.ts';
import { REDIRECT_URIS_ADDED_METADATA, UNUSED_UNTIL_METADATA, WORKSPACE_METADATA, validateClientMetadata } from '../clients/registration.ts';
import { ENGINE_ROUTES, INTERACTION_PATH, USERINFO_PATH } from './routes.ts';
import { SUPPORTED_SCOPES, authorizationScope, namesAScope, withinClientScope } from './scopes.ts';
import { keepUnusedUntil } from '../clients/unused_clients.ts';
import { settingsClient } from '../clients/first_party.ts';
import { withSettingsSignIn } from './first_party_grant.ts';
import { rotatedRegistrationTokenOutlivesItsSuccessor } from './registration_token_rotation.ts';
import { productInteractionPolicy } from './interaction_policy.ts';

type LogoutFeature = NonNullable<NonNullable<Configuration['features']>['rpInitiatedLogout']>;

/**
 * The pages the engine shows, which the host supplies (src/http/engine_pages.ts): errors that must
 * not redirect to the client (an unknown client, an unregistered redirect_uri), and the sign-out
 * question and its answer (RP-Initiated Logout).
 */
export interface EnginePages {
  renderError: NonNullable<Configuration['renderError']>;
  logoutSource: NonNullable<LogoutFeature['logoutSource']>;
  postLogoutSuccessSource: NonNullable<LogoutFeature['postLogoutSuccessSource']>;
}

export interface OAuthServer {
  provider: Provider;
  /** The data API's resource identifier: the audience of a token whose request names no resource. */
  audience: string;
  /** The APIs tokens are issued for: the data API, /mcp, and those an operator registered. */
  resources: ProtectedResources;
  /** Clients' metadata documents; undefined with CIMD=off. */
  documents: MetadataDocuments | undefined;
  grantWorkspaces: GrantWorkspaces;
  /** When each grant last got tokens (the settings area's "last used"). */
  grantActivity: GrantActivity;
  /** Refresh token rotations, completed by the token endpoint's last step once its answer is settled. */
  rotations: RefreshTokenRotations;
}

export interface ProviderDependencies {
  config: Config;
  store: Store;
  accounts: Accounts;
  keys: KeyMaterial;
  revocations: RevocationList;
  /** Absent for the admin CLI, which only creates records and never shows a page. */
  pages?: EnginePages | undefined;
  /** The limit on new interactions per client address; absent with RATE_LIMITS=off and for the admin CLI. */
  newInteractions?: NewInteractionLimit | undefined;
  /** The limit on new client metadata documents per client address; absent with RATE_LIMITS=off and for the admin CLI. */
  newMetadataDocuments?: NewMetadataDocumentLimit | undefined;
}

/** How long fetching a client's metadata document may take: the authorization request waits for it. */
const METADATA_DOCUMENT_TIMEOUT_MS = 2500;

/**
 * What a client may sign its `private_key_jwt` assertion with, at every endpoint that
 * authenticates clients. Asymmetric only: client secrets are stored hashed, so nothing may be
 * keyed with them (no client_secret_jwt). FAPI 2.0's ES256, PS256 and EdDSA, and RS256, which
 * most libraries sign with.
 */
const CLIENT_AUTH_SIGNING_ALGORITHMS: SigningAlgorithm[] = ['ES256', 'PS256', 'EdDSA', 'RS256'];

/** With metadata documents off, the engine has nothing to fetch. */
const refuseFetching = () => Promise.reject(new Error('this server fetches nothing'));

/** Configures oidc-provider, the certified engine, for this product. Everything it can do itself, it does. */
export function buildProvider({ config, store, accounts, keys, revocations, pages, newInteractions, newMetadataDocuments }: ProviderDependencies): OAuthServer {
  const audience = apiAudience(config.issuer);
  const documents = config.cimd && new MetadataDocuments(
    store.model(MetadataDocuments.MODEL),
    safeFetch({ trustedHosts: config.cimd.trustedHosts, timeoutMs: METADATA_DOCUMENT_TIMEOUT_MS, maxBytes: REGISTRATION_BODY_MAX }),
    { allowedDomains: config.cimd.allowedDomains },
  );
  const resources = new ProtectedResources(store.model(ProtectedResources.MODEL), builtInResources(config.issuer, config.dpopRequired));
  const refreshTokenValues = new RefreshTokenValues(keys.keyRing.derivedKeys(RefreshTokenValues.PURPOSE));
  const [dpopNonceSecret] = keys.keyRing.derivedKeys(DPOP_NONCE_PURPOSE);
  const grantWorkspaces = new GrantWorkspaces(store.model(GrantWorkspaces.MODEL));
  const grantActivity = new GrantActivity(store.model(GrantActivity.MODEL));
  const rotations = new RefreshTokenRotations(store.model('RefreshToken'));
  // The clients held to the FAPI 2.0 profile (src/clients/fapi.ts): every one with FAPI=on.
  const fapiClient = (client: Client) => isFapiClient(client, config.fapi);

  const configuration: Configuration = {
    adapter: engineAdapterFactory(store, new RecordsAtRest(keys.keyRing), grantWorkspaces, revocations, grantActivity, refreshTokenValues, rotations, newInteractions),
    findAccount: findAccount(accounts, grantWorkspaces),
    jwks: keys.jwks as Configuration['jwks'],
    cookies: { keys: keys.cookieKeys, names: cookieNames(config.issuer) },
    routes: { ...ENGINE_ROUTES, userinfo: USERINFO_PATH },
    interactions: {
      url: (_ctx: KoaContextWithOIDC, interaction) => `${config.basePath}${INTERACTION_PATH}/${interaction.uid}`,
      policy: productInteractionPolicy(),
    },
    ...(pages ? { renderError: pages.renderError } : {}),

    scopes: [...SUPPORTED_SCOPES],
    // Every ID token says how and when the user signed in (the engine's default adds them only on request).
    claims: { openid: ['sub', 'acr', 'amr', 'auth_time'], profile: [...PROFILE_CLAIM_NAMES] },
    acrValues: ACR_VALUES,
    // The engine ignores unknown scope values and has no default; the product refuses the first and defaults to `api`,
    // within the scope the client registered.
    extraParams: {
      scope: (ctx: KoaContextWithOIDC, value: string | undefined) => {
        ctx.oidc.params!.scope = withinClientScope(authorizationScope(value), ctx.oidc.client?.scope, namesAScope(value));
      },
    },
    responseTypes: ['code'],
    // FAPI 2.0 clients always (src/clients/fapi.ts).
    pkce: { required: pkceRequired(config.pkceRequired, fapiClient) },
    allowOmittingSingleRegisteredRedirectUri: false,
    // private_key_jwt with keys registered inline (`jwks`), or by reference (`jwks_uri`, fetched as metadata documents are, only with CIMD on):
    // each assertion used once on every instance, its audience the issuer, its exp and iat within bounds (src/clients/client_assertions.ts);
    // a FAPI 2.0 client's signed with an algorithm the profile allows (src/clients/fapi.ts).
    clientAuthMethods: ['client_secret_post', 'client_secret_basic', 'private_key_jwt', 'none'],
    assertJwtClientAuthClaimsAndHeader: (ctx, claims, header, client) => {
      audienceIsTheIssuer(ctx, claims);
      assertionTimesAreBounded(claims);
      fapiAssertionAlgorithm(header, client, config.fapi);
    },
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
      id_token_signed_response_alg: 'RS256',
    },
    // Client secrets are stored hashed, so nothing may be keyed with them (no HS256, no client_secret_jwt).
    // Of these, the engine offers (and lets a client register) only those the server's keys sign.
    enabledJWA: {
      idTokenSigningAlgValues: ['RS256', 'ES256'],
      userinfoSigningAlgValues: ['RS256', 'ES256'],
      clientAuthSigningAlgValues: CLIENT_AUTH_SIGNING_ALGORITHMS,
      // As client assertions: asymmetric only (no `none`, no HS256 keyed with a hashed secret).
      requestObjectSigningAlgValues: CLIENT_AUTH_SIGNING_ALGORITHMS,
      dPoPSigningAlgValues: DPOP_SIGNING_ALGORITHMS,
    },
    extraClientMetadata: {
      // In this order: unused_until depends on the workspace being resolved.
      // FAPI_METADATA last: its rules apply to the metadata the others have settled.
      properties: [WORKSPACE_METADATA, REDIRECT_URIS_ADDED_METADATA, INTROSPECTION_AUDIENCE, UNUSED_UNTIL_METADATA, FAPI_METADATA],
      validator: (ctx, key, value, metadata) => {
        validateClientMetadata(ctx, key, value, metadata, { keysByReference: documents !== undefined });
        keepOperatorIntrospectionAudience(ctx, key, value, metadata);
        keepUnusedUntil(ctx, key, metadata, config.unusedClientTtl);
        applyFapiProfile(ctx, key, metadata, config.fapi);
        if (key === FAPI_METADATA) requirePushedRequests(metadata, config.parRequired);
      },
    },

    ttl: {
      AccessToken: LIFETIMES.AccessToken,
      ClientCredentials: LIFETIMES.ClientCredentials,
      AuthorizationCode: LIFETIMES.AuthorizationCode,
      RefreshToken: refreshTokenLifetime(config.refreshTokenAbsoluteLifetime, fapiClient),
      IdToken: LIFETIMES.IdToken,
      Interaction: LIFETIMES.Interaction,
      Session: sessionLifetime,
      // A grant outlives every refresh token it backs.
      Grant: Math.max(LIFETIMES.Grant, config.refreshTokenAbsoluteLifetime),
      // Unset: a registration access token lives as long as its client.
      ...(config.registrationAccessTokenTtl ? { RegistrationAccessToken: config.registrationAccessTokenTtl } : {}),
    },
    // Consent reaches only the redirect URIs the client had when it was given. The settings area's
    // own sign-in client is first-party: no consent page (src/clients/first_party.ts, first_party_grant.ts).
    loadExistingGrant: withSettingsSignIn(loadConsentedGrant(documents)),
    clients: [settingsClient(config.issuer)],
    // Pairwise subjects are not offered and sector_identifier_uri is refused at registration; a
    // client stored before that was refused is never fetched for either.
    sectorIdentifierUriValidate: () => false,
    // Tokens belong to the grant, not to the browser session that created it.
    expiresWithSession: () => false,
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    // Each use rotates a refresh token, except a FAPI 2.0 client's (section 5.3.2.1; src/engine/refresh_tokens.ts),
    // whose refusals held for its request are thrown there (src/engine/refusals_at_redemption.ts).
    rotateRefreshToken: refusedUnlessRotated(rotatesRefreshTokens(fapiClient)),
    extraTokenClaims: workspaceClaims(accounts, grantWorkspaces),

    // Pages on a redirect URI's origin read the token, revocation and introspection endpoints' answers.
    clientBasedCORS: browserOriginAllowed,

    // Every fetch the engine makes goes through the one SSRF-safe fetcher and its shared cache: a
    // client's metadata document or its jwks_uri (registration refuses the metadata that would make it fetch anything else).
    fetch: documents ? documents.fetch : refuseFetching,
    // The fetcher holds what a server sends to REGISTRATION_BODY_MAX; a document may reach the
    // engine a few bytes longer, with the fields said on its behalf (src/clients/metadata_documents.ts).
    fetchResponseBodyLimits: { 'client_id metadata document': REGISTRATION_BODY_MAX + DOCUMENT_DEFAULTS_BYTES, jwks_uri: REGISTRATION_BODY_MAX, sector_identifier_uri: 0 },

    discovery: {
      // RFC 8414 defaults these to client_secret_basic alone; say what really works. With
      // private_key_jwt listed, RFC 8414 section 2 requires the algorithms it may be signed with.
      revocation_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic', 'private_key_jwt', 'none'],
      revocation_endpoint_auth_signing_alg_values_supported: CLIENT_AUTH_SIGNING_ALGORITHMS,
      // A public client may introspect nothing (src/tokens/introspection_policy.ts).
      introspection_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic', 'private_key_jwt'],
      introspection_endpoint_auth_signing_alg_values_supported: CLIENT_AUTH_SIGNING_ALGORITHMS,
      // Every client a developer can have pushes its requests (src/clients/pushed_requests.ts, src/clients/fapi.ts).
      ...(config.parRequired || config.fapi ? { require_pushed_authorization_requests: true } : {}),
    },

    features: {
      devInteractions: { enabled: false },
      registration: {
        enabled: true,
        idFactory: newClientId,
        initialAccessToken: config.registration === 'initial_access_token',
        issueRegistrationAccessToken: true,
      },
      registrationManagement: { enabled: true, rotateRegistrationAccessToken: true },
      clientCredentials: { enabled: true },
      // Least privilege (RFC 7662 section 4): a client sees its own tokens, an operator's resource server those meant for it.
      introspection: { enabled: true, allowedPolicy: introspectionAllowedPolicy },
      // RFC 7009 section 2.1, one rule for refresh tokens and JWT access tokens alike.
      revocation: { enabled: true, allowedPolicy: revocationAllowedPolicy },
      resourceIndicators: resourceIndicators(resources, audience),
      // Enabled so the engine accepts `claims.userinfo` requests; the endpoint itself is served by
      // the host, in front of the engine's (src/http/endpoints/userinfo.ts): the engine's accepts only audience-less tokens.
      userinfo: { enabled: true },
      // Registration keeps `userinfo_signed_response_alg` and discovery lists the algorithms; the
      // host's endpoint signs (src/tokens/signed_userinfo.ts).
      jwtUserinfo: { enabled: true },
      // OpenID Connect RP-Initiated Logout 1.0 with the product's pages (src/interactions/logout.ts).
      // Signing out ends the browser's session only: tokens outlive it (`expiresWithSession` is
      // false, so the engine marks every authorization `persistsLogout` and revokes no grant).
      rpInitiatedLogout: { enabled: true, ...(pages ? { logoutSource: pages.logoutSource, postLogoutSuccessSource: pages.postLogoutSuccessSource } : {}) },
      // RFC 9449: a token request with a DPoP proof gets tokens bound to the proof's key (`cnf.jkt`,
      // token_type DPoP; a public client's refresh tokens too), and a client registered with
      // `dpop_bound_access_tokens` must send one. Each proof is used once on every instance
      // (ReplayDetection, src/clients/client_assertions.ts). Nonces are made from a key every instance
      // derives alike, so one handed out by one instance is good at all; the APIs verify proofs
      // themselves (src/tokens/dpop_proofs.ts).
      dPoP: { enabled: true, nonceSecret: dpopNonceSecret, requireNonce: () => config.dpopNonceRequired },
      // RFC 9126 at /oauth/par: a request_uri lives 60 s and is used once (the engine's defaults);
      // required for every client with PAR_REQUIRED, else for those registered to require it.
      pushedAuthorizationRequests: { enabled: true, requirePushedAuthorizationRequests: false, allowUnregisteredRedirectUris: false },
      // Individual claims by name (OpenID Connect Core 5.5); the user consents to them with the scopes.
      claimsParameter: { enabled: true },
      // JAR (RFC 9101): request objects by value or pushed, signed with the client's own keys
      // (enabledJWA below); a FAPI 2.0 client's with an algorithm the profile allows (src/clients/fapi.ts).
      requestObjects: {
        enabled: true,
        assertJwtClaimsAndHeader: async (ctx, claims, header, client) => {
          // The engine keeps a pushed request as an object of its own (alg none), checked when it was pushed.
          if (!('PushedAuthorizationRequest' in ctx.oidc.entities)) fapiRequestObjectAlgorithm(header, client, config.fapi);
          await engineDefaults.features.requestObjects.assertJwtClaimsAndHeader(ctx, claims, header, client);
        },
      },
      deviceFlow: { enabled: false },
      // A client_id that is an https URL names its metadata document (src/clients/metadata_documents.ts).
      // Experimental in the engine: acknowledged at the draft it implements, checked again at every upgrade.
      clientIdMetadataDocument: {
        enabled: documents !== undefined,
        ack: 'draft-02',
        cacheDuration: { min: LIFETIMES.MetadataDocument.minSeconds, max: LIFETIMES.MetadataDocument.maxSeconds },
        allowFetch: allowMetadataDocumentFetch(documents, newMetadataDocuments),
      },
      // The FAPI 2.0 Security Profile for the clients src/clients/fapi.ts names (with FAPI=on, every
      // client that obtains tokens): the engine requires their authorization requests' redirect_uri
      // and PKCE, and checks their client assertions' audience; the rest is in their metadata.
      fapi: { enabled: true, profile: fapiProfile(config.fapi) },
      backchannelLogout: { enabled: false },
      jwtIntrospection: { enabled: false },
      jwtResponseModes: { enabled: false },
    },
  };

  const provider = new Provider(config.issuer, configuration);
  provider.proxy = config.proxyHops > 0;
  countedInitialAccessTokens(provider);
  rotatedRegistrationTokenOutlivesItsSuccessor(provider);
  useHashedClientSecrets(provider);
  refreshTokensNameTheirGrant(provider, refreshTokenValues);
  findClientsOncePerRequest(provider);
  assertionsUsedOnce(provider, store.model('ReplayDetection'));
  holdFapiPolicy(provider, config.fapi);
  registerClientCredentialsGrant(provider, resources, audience);
  proofCheckedBeforeCodeIsUsed(provider, store.model('ReplayDetection'));
  proofBindsPublicClientRefreshTokens(provider);
  codeRedemptionRacesRevokeTheGrant(provider, grantWorkspaces);
  refusalsHeldUntilRedemption(provider);
  return { provider, audience, resources, documents, grantWorkspaces, grantActivity, rotations };
}
