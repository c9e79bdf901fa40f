import { errors, type Client, type KoaContextWithOIDC } from 'oidc-provider';

import { LOOPBACK_HOSTS } from '../../config/parsers.ts';
import { isMetadataDocumentUrl } from './metadata_documents.ts';
import { isNativeRedirectSet } from './native_apps.ts';
import { checkRegistrationHygiene, writtenAuthority } from './registration_hygiene.ts';
import { nowSeconds } from '../shared/clock.ts';

/**
 * Dynamic client registration policy (RFC 7591 / RFC 7592), applied through the engine's
 * `extraClientMetadata` hook, which runs before the engine's own metadata checks:
 * - a client registered for authorization_code also gets refresh_token;
 * - redirect URIs (and post-logout redirect URIs) are https, http on loopback, or a private-use scheme (native apps, RFC 8252);
 * - client_credentials needs a workspace, which only an initial access token made by a
 *   workspace admin can give (`workspace_id`, never taken from the request body);
 * - no metadata makes the server fetch a URL the registrant chose (see FETCHED_METADATA);
 * - metadata asking for encryption or for JWT answers the server does not give is refused (UNOFFERED_METADATA);
 * - an update cannot make a confidential client public, and the time each redirect URI was added
 *   by an update is kept, so consent given before does not reach it (src/engine/redirect_uri_consent.ts).
 */
export const WORKSPACE_METADATA = 'workspace_id';
/**
 * When each redirect URI was added by an RFC 7592 update (`{ uri: seconds since the epoch }`;
 * absent for the URIs the client was registered with). Kept by the server: never taken from a
 * request, never shown in a response (hideServerKeptMetadata).
 */
export const REDIRECT_URIS_ADDED_METADATA = 'redirect_uris_added_at';
/** Until when a self-registered client that has obtained no token yet is kept (unused_clients.ts); kept by the server, never shown. */
export const UNUSED_UNTIL_METADATA = 'unused_until';

const workspaces = new WeakMap<Client, string | undefined>();
const redirectUriAdditions = new WeakMap<Client, Readonly<Record<string, number>>>();

/**
 * The workspace a client is bound to, if any. The engine reuses a Client instance for as long as
 * its record is unchanged, so the answer is kept per instance: `metadata()` rebuilds the whole
 * record, too slow to call on every token request.
 */
export function clientWorkspace(client: Client): string | undefined {
  if (!workspaces.has(client)) {
    const workspace = client.metadata()[WORKSPACE_METADATA];
    workspaces.set(client, typeof workspace === 'string' ? workspace : undefined);
  }
  return workspaces.get(client);
}

/** When the client's redirect URIs were added by updates (none: all registered with it); kept per instance, as clientWorkspace. */
export function redirectUrisAddedAt(client: Client): Readonly<Record<string, number>> {
  let added = redirectUriAdditions.get(client);
  if (!added) {
    const stored = client.metadata()[REDIRECT_URIS_ADDED_METADATA];
    added = stored && typeof stored === 'object'
      ? Object.fromEntries(Object.entries(stored).filter((entry): entry is [string, number] => typeof entry[1] === 'number'))
      : {};
    redirectUriAdditions.set(client, added);
  }
  return added;
}

/** Metadata the server keeps about a client, never taken from a document. */
const SERVER_KEPT = new Set([REDIRECT_URIS_ADDED_METADATA, UNUSED_UNTIL_METADATA, 'introspection_audience']);

type Metadata = Record<string, unknown>;

/**
 * Metadata that makes the engine open a connection to the URL in it, refused so that no client
 * record ever names one: registration is open to anyone, who could otherwise make the server probe
 * any host and port it can reach.
 */
const FETCHED_METADATA: ReadonlyArray<[string, string]> = [
  // Fetched to check pairwise subject identifiers, which are not offered (subject_type is always public).
  ['sector_identifier_uri', 'sector_identifier_uri is not supported: this server issues public subject identifiers only (no pairwise), so it has no use for one; register without it'],
  // Client keys: a private_key_jwt client registers them inline (jwks); by reference only where the
  // server fetches documents (RegistrationOptions.keysByReference), never in a metadata document.
  ['jwks_uri', 'jwks_uri is not supported here (CIMD=off: the server fetches no documents); a private_key_jwt client registers its public keys inline, in jwks'],
];

/**
 * Metadata asking for what this server does not do, refused rather than dropped as the engine
 * would drop it (its features off): a client that asked for encrypted ID tokens would otherwise be
 * registered and then handed signed ones it cannot read as asked.
 */
const UNOFFERED_METADATA: ReadonlyArray<[fields: readonly string[], why: string]> = [
  [
    ['id_token', 'userinfo', 'authorization', 'introspection'].flatMap((what) => [`${what}_encrypted_response_alg`, `${what}_encrypted_response_enc`])
      .concat('request_object_encryption_alg', 'request_object_encryption_enc'),
    'this server encrypts nothing and decrypts nothing: ID tokens and userinfo answers are signed, request objects are taken signed',
  ],
  [['authorization_signed_response_alg'], 'JWT-secured authorization responses (JARM) are not offered: the code comes in the query, the fragment or a form_post'],
  [['introspection_signed_response_alg'], 'introspection answers in JSON only, never as a signed JWT'],
];

/** Refuses the first field of UNOFFERED_METADATA the request sets (null is none: RFC 7592 takes it as leaving a field out). */
function refuseUnofferedMetadata(sent: unknown): void {
  if (!sent || typeof sent !== 'object') return;
  const given = sent as Record<string, unknown>;
  for (const [fields, why] of UNOFFERED_METADATA) {
    const field = fields.find((name) => given[name] !== undefined && given[name] !== null);
    if (field) throw new errors.InvalidClientMetadata(`${field} is not supported: ${why}; register without it`);
  }
}

/** A document's keys come with it: one fetch per client, never a second one on its say-so. */
const DOCUMENT_JWKS_URI = 'jwks_uri is not supported in a client metadata document; a private_key_jwt client puts its public keys in the document itself, in jwks';

/** What registration allows beyond the rules above. */
export interface RegistrationOptions {
  /**
   * A `jwks_uri` for `private_key_jwt`: only where the server fetches documents at all, through
   * the one SSRF-safe fetcher and the cache it shares with metadata documents (CIMD on).
   */
  keysByReference: boolean;
}

export function validateClientMetadata(
  ctx: KoaContextWithOIDC | undefined, key: string, _value: unknown, metadata: Metadata, options: RegistrationOptions = { keysByReference: false },
): void {
  const route = ctx?.oidc?.route;
  if (isMetadataDocumentUrl(metadata.client_id)) return checkMetadataDocument(key, metadata);
  // Clients loaded from storage were checked when they were registered or updated.
  if (!ctx || (route !== 'registration' && route !== 'client_update')) return;
  if (key === REDIRECT_URIS_ADDED_METADATA) {
    recordRedirectUriAdditions(route === 'client_update' ? ctx.oidc.client : undefined, metadata);
    return;
  }
  if (key !== WORKSPACE_METADATA) return;

  checkRegistrationHygiene(metadata);
  // What the engine does not recognise is gone from `metadata` by now: it is read from the request.
  refuseUnofferedMetadata(ctx.oidc.body);
  for (const [field, description] of FETCHED_METADATA) {
    if (field === 'jwks_uri' && options.keysByReference) continue;
    if (metadata[field] !== undefined && metadata[field] !== null) throw new errors.InvalidClientMetadata(description);
  }
  if (metadata.jwks_uri !== undefined && metadata.jwks_uri !== null) checkKeysByReference(metadata);
  else checkInlineKeys(metadata);
  if (route === 'client_update') keepConfidential(ctx.oidc.client, metadata);

  if (route === 'registration') {
    const workspace = ctx.state.registrationWorkspace;
    if (workspace) metadata[WORKSPACE_METADATA] = workspace;
    else delete metadata[WORKSPACE_METADATA];
  } else {
    const existing = ctx.oidc.client && clientWorkspace(ctx.oidc.client);
    if (existing) metadata[WORKSPACE_METADATA] = existing;
    else delete metadata[WORKSPACE_METADATA];
  }

  const grantTypes = Array.isArray(metadata.grant_types) ? metadata.grant_types as unknown[] : [];
  const requestedResponseTypes = (ctx.oidc.body as Metadata | undefined)?.response_types;
  // An update that leaves them as they are keeps a client stored before this rule updatable (RFC 7592 2.2: it sends back what it read).
  if (route === 'registration' || grantsChange(ctx.oidc.client, grantTypes, requestedResponseTypes)) checkGrantsMatchResponses(grantTypes, requestedResponseTypes);
  if (grantTypes.includes('authorization_code') && !grantTypes.includes('refresh_token')) {
    metadata.grant_types = [...grantTypes, 'refresh_token'];
  }
  // A client without authorization_code has no use for response_type=code (the engine's default).
  if (!grantTypes.includes('authorization_code')) metadata.response_types = [];
  if (grantTypes.includes('client_credentials') && !metadata[WORKSPACE_METADATA]) {
    throw new errors.InvalidClientMetadata(
      'grant_types client_credentials is only for clients bound to a workspace: register with an initial access token created by a workspace admin (Authorization: Bearer <token>)',
    );
  }
  if (grantTypes.includes('client_credentials') && metadata.token_endpoint_auth_method === 'none') {
    throw new errors.InvalidClientMetadata('grant_types client_credentials needs a confidential client; token_endpoint_auth_method none cannot use it');
  }

  checkRedirectUris(metadata, (ctx.oidc.body as Metadata | undefined)?.application_type);
}

/**
 * RFC 7591 section 2.1: grant_types and the response_types the registrant named must agree
 * (`code` with authorization_code), and leave a grant that gets tokens: refresh tokens come from
 * authorization_code only. Refused rather than changed, so a client never ends up registered for
 * nothing it can use.
 */
function checkGrantsMatchResponses(grantTypes: readonly unknown[], requestedResponseTypes: unknown): void {
  if (grantTypes.length === 0) {
    throw new errors.InvalidClientMetadata('grant_types must name at least one grant type (authorization_code, client_credentials), or be left out for authorization_code and refresh_token');
  }
  const responseTypes = Array.isArray(requestedResponseTypes) ? requestedResponseTypes as unknown[] : undefined;
  const unsupported = responseTypes?.find((type) => type !== 'code');
  if (unsupported !== undefined) {
    throw new errors.InvalidClientMetadata(`response_types may hold code only, the one response type this server offers; ${typeof unsupported === 'string' ? `'${unsupported}'` : 'a value that is no string'} is not offered`);
  }
  const codeFlow = grantTypes.includes('authorization_code');
  if (codeFlow && responseTypes && !responseTypes.includes('code')) {
    throw new errors.InvalidClientMetadata('grant_types authorization_code needs response_types code (or leave response_types out)');
  }
  if (!codeFlow && responseTypes?.includes('code')) {
    throw new errors.InvalidClientMetadata('response_types code needs grant_types authorization_code (or leave response_types out)');
  }
  if (!codeFlow && grantTypes.includes('refresh_token')) {
    throw new errors.InvalidClientMetadata('grant_types refresh_token comes with authorization_code, the grant that issues refresh tokens');
  }
}

/** Whether an update (or a registration: no client yet) names grant or response types other than the client's. */
function grantsChange(client: Client | undefined, grantTypes: readonly unknown[], requestedResponseTypes: unknown): boolean {
  const sameSet = (a: readonly unknown[], b: readonly unknown[]) => a.length === b.length && a.every((value) => b.includes(value));
  if (!client || !sameSet(grantTypes, client.grantTypes ?? [])) return true;
  return Array.isArray(requestedResponseTypes) && !sameSet(requestedResponseTypes, client.responseTypes ?? []);
}

/** A `jwks_uri` is fetched by the SSRF-safe fetcher, which fetches https URLs only; and it is for `private_key_jwt`. */
function checkKeysByReference(metadata: Metadata): void {
  const url = typeof metadata.jwks_uri === 'string' ? URL.parse(metadata.jwks_uri) : null;
  if (url?.protocol !== 'https:' || url.username || url.password) {
    throw new errors.InvalidClientMetadata('jwks_uri must be an https URL without a user name or password');
  }
  if (metadata.token_endpoint_auth_method !== 'private_key_jwt') {
    throw new errors.InvalidClientMetadata('jwks_uri is for a private_key_jwt client\'s keys; register it with token_endpoint_auth_method private_key_jwt');
  }
}

/**
 * A `private_key_jwt` client's keys given inline must hold one: the engine takes `{"keys":[]}`,
 * and a client registered with it could never authenticate.
 */
function checkInlineKeys(metadata: Metadata): void {
  if (metadata.token_endpoint_auth_method !== 'private_key_jwt') return;
  const keys = (metadata.jwks as { keys?: unknown } | undefined)?.keys;
  if (Array.isArray(keys) && keys.length === 0) {
    throw new errors.InvalidClientMetadata('jwks must hold the public key the client signs its assertions with (private_key_jwt); an empty keys list holds none');
  }
}

/**
 * A client that describes itself in a metadata document (src/clients/metadata_documents.ts) is
 * checked as strictly as a registration, each time the engine builds it from the document: the
 * same size and field hygiene, the same redirect URI rules, nothing the server keeps (a workspace,
 * rights an operator gives) taken from it. It is a public client (the engine refuses secret-based
 * methods in a document; one that names none uses `none`).
 */
function checkMetadataDocument(key: string, metadata: Metadata): void {
  if (key !== WORKSPACE_METADATA) {
    if (SERVER_KEPT.has(key)) delete metadata[key];
    return;
  }
  delete metadata[WORKSPACE_METADATA];
  checkRegistrationHygiene(metadata);
  for (const [field, description] of FETCHED_METADATA) {
    if (metadata[field] === undefined || metadata[field] === null) continue;
    throw new errors.InvalidClientMetadata(field === 'jwks_uri' ? DOCUMENT_JWKS_URI : description);
  }
  const grantTypes = Array.isArray(metadata.grant_types) ? metadata.grant_types as unknown[] : ['authorization_code'];
  if (grantTypes.includes('client_credentials')) throw new errors.InvalidClientMetadata('a client described by a metadata document cannot use client_credentials: it is bound to no workspace');
  if (grantTypes.includes('authorization_code') && !grantTypes.includes('refresh_token')) metadata.grant_types = [...grantTypes, 'refresh_token'];
  // The engine has filled in its defaults; src/clients/metadata_documents.ts said `none` and, for a
  // native app's redirect URIs, `native` on the document's behalf where it named none.
  checkRedirectUris(metadata, metadata.application_type);
}

/**
 * A confidential client stays confidential: an update to `none` would let anyone who holds its
 * client_id use its refresh tokens (RFC 9700 2.2.2 binds them to the client's authentication).
 */
function keepConfidential(client: Client | undefined, metadata: Metadata): void {
  const before = client?.tokenEndpointAuthMethod;
  if (before && before !== 'none' && metadata.token_endpoint_auth_method === 'none') {
    throw new errors.InvalidClientMetadata(
      `token_endpoint_auth_method cannot change from ${before} to none: a confidential client stays confidential (its refresh tokens would otherwise work with its client_id alone); register a new public client instead`,
    );
  }
}

/**
 * Keeps when each redirect URI was added: at registration, none (consent can only come later);
 * at an update, the URIs the client already had keep their time and the new ones get now.
 */
function recordRedirectUriAdditions(client: Client | undefined, metadata: Metadata): void {
  const uris = Array.isArray(metadata.redirect_uris) ? metadata.redirect_uris.filter((uri): uri is string => typeof uri === 'string') : [];
  const added: Record<string, number> = {};
  if (client) {
    const before = new Set(client.redirectUris ?? []);
    const known = redirectUrisAddedAt(client);
    const now = nowSeconds();
    for (const uri of uris) {
      if (!before.has(uri)) added[uri] = now;
      else if (known[uri] !== undefined) added[uri] = known[uri];
    }
  }
  if (Object.keys(added).length) metadata[REDIRECT_URIS_ADDED_METADATA] = added;
  else delete metadata[REDIRECT_URIS_ADDED_METADATA];
}

/**
 * Where the browser is sent: after authorization (`redirect_uris`) and after sign-out
 * (`post_logout_redirect_uris`, RP-Initiated Logout 1.0 section 3.1), under the same rules.
 */
const REDIRECT_URI_FIELDS = ['redirect_uris', 'post_logout_redirect_uris'] as const;

function checkRedirectUris(metadata: Metadata, requestedApplicationType: unknown): void {
  for (const field of REDIRECT_URI_FIELDS) checkRedirectUriList(field, metadata[field]);
  // Said on the client's behalf when it did not (the engine has already filled in its default,
  // `web`, so the request body tells).
  if (requestedApplicationType === undefined && isNativeRedirectSet(metadata.redirect_uris)) metadata.application_type = 'native';
}

/** Checks one list of redirect URIs. */
function checkRedirectUriList(field: string, uris: unknown): void {
  if (uris === undefined) return;
  if (!Array.isArray(uris) || uris.some((uri) => typeof uri !== 'string')) {
    throw new errors.InvalidClientMetadata(`${field} must be an array of strings`);
  }
  for (const uri of uris as string[]) {
    const url = URL.parse(uri);
    if (!url || !/^[a-z][a-z0-9+.-]*:/i.test(uri)) {
      throw new errors.InvalidClientMetadata(`${field} must be absolute URIs; '${uri}' is not`);
    }
    if (uri.includes('#')) throw new errors.InvalidClientMetadata(`${field} must not contain a fragment; remove '#...' from '${uri}'`);
    if (uri.includes('*')) throw new errors.InvalidClientMetadata(`${field} must not contain wildcards; register every exact URI ('${uri}')`);
    // A browser sent to one sends it percent-encoded, so it would come back as another URI than
    // the one registered (RFC 6749 section 3.1.2: an absolute URI as RFC 3986 writes it).
    if (!RFC_3986_URI.test(uri)) {
      throw new errors.InvalidClientMetadata(`${field} must be written in the characters of RFC 3986, others percent-encoded as %XX (a host in punycode, xn--...); '${uri}' is not`);
    }
    const host = url.protocol === 'http:' || url.protocol === 'https:' ? writtenHost(uri) : undefined;
    if (host === '') {
      throw new errors.InvalidClientMetadata(`${field} must name a host after '${url.protocol}//'; '${uri}' names none`);
    }
    if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) {
      throw new errors.InvalidClientMetadata(`${field} must use https; http is only allowed on loopback (127.0.0.1, [::1], localhost), got '${uri}'`);
    }
    // The engine and the browser compare and follow the URI as written: loopback by another spelling
    // (127.1, 0x7f000001, [0:0:0:0:0:0:0:1]) would be kept and matched as such.
    if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(host!.toLowerCase())) {
      throw new errors.InvalidClientMetadata(`${field} must write loopback as 127.0.0.1, [::1] or localhost, got '${uri}'`);
    }
    if (NOT_PRIVATE_USE_SCHEMES.has(url.protocol)) {
      throw new errors.InvalidClientMetadata(`${field} must use https, http on loopback, or a private-use scheme of the app's own (com.example.app:/callback, RFC 8252 section 7.1); '${url.protocol}' is no app's, got '${uri}'`);
    }
  }
}

/** Only RFC 3986's characters (unreserved, reserved), and `%` only before two hex digits. */
const RFC_3986_URI = /^(?:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$/;

/** The host of an http or https URI as written (writtenAuthority, without userinfo and port): '' when none is written. */
function writtenHost(uri: string): string {
  return (writtenAuthority(uri) ?? '').replace(/^.*@/, '').replace(/:\d*$/, '');
}

/**
 * Schemes that are registered for something else, so that no app receives a redirect through
 * them. A private-use scheme without a period (`myapp:`) is accepted, though RFC 8252 section 8.4
 * says a server SHOULD refuse it: MCP hosts register such schemes (`cursor:`), and refusing them
 * would break clients people use.
 */
const NOT_PRIVATE_USE_SCHEMES = new Set(['ws:', 'wss:', 'ftp:', 'mailto:', 'tel:', 'sms:', 'urn:', 'view-source:']);
