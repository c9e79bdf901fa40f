import type { ModuleContext } from '../context.ts';
import { fetchJwks, fetchMetadata, stringList, type ProviderMetadata } from '../client/provider.ts';
import { checkServerJwks } from '../checks/jwks.ts';
import { schemaProblems, unknownMembers } from '../checks/server_metadata_schema.ts';
import { HTTPS_RULE, isHttpsOrLoopback } from '../checks/urls.ts';
import { mediaType } from '../http/http_client.ts';
import type { ConformanceModule } from '../module.ts';

const WELL_KNOWN = '/.well-known/openid-configuration';
const OIDC_RESPONSE_TYPES = ['code', 'code id_token', 'id_token', 'token id_token', 'code id_token token', 'code token'];
const DYNAMIC_RESPONSE_TYPES = ['code', 'id_token', 'token id_token'];
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
/** A well-formed BCP 47 tag (RFC 5646 2.1, the common forms); the suite also checks the IANA registry. */
const LANGUAGE_TAG = /^[a-z]{2,3}(-[a-z]{4})?(-([a-z]{2}|\d{3}))?(-([a-z\d]{5,8}|\d[a-z\d]{3}))*$/i;

type Variant = 'static_client' | 'dynamic_client';

/**
 * OIDCCDiscoveryEndpointVerification. The config plan runs it with a static client, the dynamic
 * plan with a dynamic one: the latter also requires the response and grant types OpenID Connect
 * Discovery makes mandatory for dynamic OPs (code, id_token, token id_token; implicit).
 */
export function discoveryEndpointVerification(variant: Variant): ConformanceModule {
  return {
    name: 'oidcc-discovery-endpoint-verification',
    variant,
    summary: `the discovery document's values as OpenID Connect Discovery and RFC 8414 require them (${variant})`,
    async run(ctx: ModuleContext) {
      const { url, response, exchange, metadata } = await fetchMetadata(ctx);
      const check = (ok: boolean, message: string) => ctx.check(ok, message, exchange);
      check(response.status === 200, `the discovery endpoint answered ${response.status}, expected 200 (OIDCD-4)`);
      check(mediaType(response) === 'application/json', `the discovery endpoint's Content-Type is ${response.headers.get('content-type')}, expected application/json (OIDCD-4)`);
      checkResponseTypes(check, metadata, variant);
      check(new URL(url).pathname.endsWith(WELL_KNOWN) && isHttpsOrLoopback(url), `the discovery URL ${url} must end with ${WELL_KNOWN} and use ${HTTPS_RULE}`);
      checkIssuer(check, metadata, url);
      for (const problem of schemaProblems(metadata)) check(false, `OP metadata does not match the RFC 8414 / OpenID Connect Discovery schema: ${problem}`);
      const unknown = unknownMembers(metadata);
      ctx.warn(unknown.length === 0, `OP metadata contains members the suite does not know: ${unknown.join(', ')}`);
      checkListed(check, metadata, 'subject_types_supported', ['public', 'pairwise'], 1, 'subject_types_supported is required to contain at least one of public or pairwise (OIDCD-3)');
      checkListed(check, metadata, 'id_token_signing_alg_values_supported', ['RS256'], 1, 'RS256 support is required, but the server does not list it in id_token_signing_alg_values_supported (OIDCD-3)');
      if (metadata.userinfo_signing_alg_values_supported !== undefined) checkListed(check, metadata, 'userinfo_signing_alg_values_supported', [], 0, '');
      checkEndpoints(ctx, check, metadata);
      await checkDiscoveredJwks(ctx, metadata);
      if (metadata.request_object_signing_alg_values_supported !== undefined) {
        ctx.warn(stringList(metadata, 'request_object_signing_alg_values_supported')?.includes('RS256') ?? false, 'request_object_signing_alg_values_supported does not list RS256 (a SHOULD in OpenID Connect Discovery)');
      }
      ctx.warn(stringList(metadata, 'claims_supported') !== undefined, 'claims_supported is missing or not an array of strings (recommended, OIDCD-3)');
      checkGrantTypes(check, metadata, variant);
      checkScopes(ctx, check, metadata);
      checkLocales(ctx, check, metadata);
      checkCodeChallengeMethods(check, metadata);
    },
  };
}

type Check = (ok: boolean, message: string) => boolean;

/** AbstractValidateJsonArray: present, an array, with at least `minimum` of `values`. */
function checkListed(check: Check, metadata: ProviderMetadata, key: string, values: string[], minimum: number, notEnough: string, equal = (a: string, b: string) => a === b): boolean {
  const listed = metadata[key];
  if (!check(listed !== undefined, `${key}: not found in the discovery document`)) return false;
  if (!check(Array.isArray(listed) && listed.every((item) => typeof item === 'string'), `'${key}' should be an array of strings`)) return false;
  const found = values.filter((value) => (listed as string[]).some((item) => equal(value, item)));
  return check(found.length >= minimum, `${notEnough}; listed: ${JSON.stringify(listed)}`);
}

/** Response types compare as sets of words ("id_token token" is "token id_token"). */
function sameResponseType(a: string, b: string): boolean {
  const words = (value: string) => value.split(' ').sort().join(' ');
  return words(a) === words(b);
}

function checkResponseTypes(check: Check, metadata: ProviderMetadata, variant: Variant): void {
  if (variant === 'dynamic_client') {
    checkListed(check, metadata, 'response_types_supported', DYNAMIC_RESPONSE_TYPES, DYNAMIC_RESPONSE_TYPES.length, `The server does not support all of the mandatory to implement response_types for dynamic OpenID Providers (${DYNAMIC_RESPONSE_TYPES.join(', ')}) (OIDCD-3, OIDCC-15.2)`, sameResponseType);
  } else {
    checkListed(check, metadata, 'response_types_supported', OIDC_RESPONSE_TYPES, 1, 'The server must support at least one of the response types defined in OpenID Connect (OIDCD-3)', sameResponseType);
  }
}

/** CheckDiscEndpointIssuer and CheckDiscEndpointIssuerIsValidUrl. */
function checkIssuer(check: Check, metadata: ProviderMetadata, url: string): void {
  const issuer = metadata.issuer;
  if (!check(typeof issuer === 'string', 'issuer is missing from the discovery document')) return;
  const withoutSlash = (value: string) => value.replace(/\/$/, '');
  const expected = withoutSlash(url.slice(0, url.length - WELL_KNOWN.length + 1));
  check(withoutSlash(issuer!) === expected, `issuer listed in the discovery document (${issuer}) is not consistent with the location the discovery document was retrieved from (${expected}) (OIDCD-4.3)`);
  const parsed = URL.parse(issuer!);
  const issues = [
    ...(isHttpsOrLoopback(issuer!) ? [] : [`must use ${HTTPS_RULE}`]),
    ...(parsed?.hostname ? [] : ['is missing a host component']),
    ...(parsed?.search || issuer!.includes('?') ? ['must not contain a query part'] : []),
    ...(parsed?.hash || issuer!.includes('#') ? ['must not contain a fragment part'] : []),
    ...(parsed?.username || parsed?.password ? ['must not contain userinfo'] : []),
  ];
  check(issues.length === 0, `issuer ${issuer} is not a valid RFC 8414 issuer identifier URL: it ${issues.join(', ')} (RFC8414-2)`);
}

/** CheckDiscEndpoint*Endpoint, CheckJwksUri and CheckDiscEndpointAllEndpointsAreHttps. */
function checkEndpoints(ctx: ModuleContext, check: Check, metadata: ProviderMetadata): void {
  const secure = (key: string) => {
    const value = metadata[key];
    if (!check(value !== undefined, `${key}: URL not found`)) return;
    check(typeof value === 'string' && URL.canParse(value) && isHttpsOrLoopback(value), `${key} must be a URL using ${HTTPS_RULE}, is ${JSON.stringify(value)} (OIDCD-3)`);
  };
  secure('authorization_endpoint');
  secure('token_endpoint');
  if (ctx.warn(metadata.userinfo_endpoint !== undefined, 'userinfo_endpoint is not in the discovery document (recommended, and needed for certification)')) secure('userinfo_endpoint');
  if (metadata.registration_endpoint !== undefined) secure('registration_endpoint');
  secure('jwks_uri');
  for (const key of Object.keys(metadata).filter((name) => name.endsWith('_endpoint'))) secure(key);
}

async function checkDiscoveredJwks(ctx: ModuleContext, metadata: ProviderMetadata): Promise<void> {
  const jwks = await fetchJwks(ctx, metadata);
  await checkServerJwks(ctx, jwks, { requireKids: false });
}

function checkGrantTypes(check: Check, metadata: ProviderMetadata, variant: Variant): void {
  const grantTypes = metadata.grant_types_supported;
  if (grantTypes === undefined) return; // absent means authorization_code and implicit
  if (variant === 'dynamic_client') {
    checkListed(check, metadata, 'grant_types_supported', ['authorization_code', 'implicit'], 2, "Servers certifying for the 'dynamic' certification profile are required to support the grant types 'authorization_code' and 'implicit' (OIDCD-3)");
    return;
  }
  check(Array.isArray(grantTypes) && grantTypes.length > 0, `grant_types_supported in discovery document, if present, must be a non-empty array (${JSON.stringify(grantTypes)})`);
}

/** CheckDiscEndpointScopesSupportedContainsOpenId (absent: a warning) and ...ScopesSupportedSyntax. */
function checkScopes(ctx: ModuleContext, check: Check, metadata: ProviderMetadata): void {
  const scopes = metadata.scopes_supported;
  if (!ctx.warn(scopes !== undefined, 'scopes_supported is not in the discovery document')) return;
  checkListed(check, metadata, 'scopes_supported', ['openid'], 1, "scopes_supported in the server's discovery document does not contain 'openid'");
  if (!Array.isArray(scopes)) return;
  const invalid = scopes.filter((scope) => typeof scope !== 'string' || !SCOPE_TOKEN.test(scope));
  check(invalid.length === 0, `Invalid scope syntax in scopes_supported (RFC 6749 A.4): ${JSON.stringify(invalid)}`);
}

/** CheckDiscEndpointLocalesSyntax (failure) and ...LocalesCanonicalCasing (warning). */
function checkLocales(ctx: ModuleContext, check: Check, metadata: ProviderMetadata): void {
  for (const key of ['ui_locales_supported', 'claims_locales_supported']) {
    const tags = metadata[key];
    if (tags === undefined) continue;
    if (!check(Array.isArray(tags), `${key}: expected a JSON array, got ${JSON.stringify(tags)}`)) continue;
    for (const tag of tags as unknown[]) {
      if (!check(typeof tag === 'string' && LANGUAGE_TAG.test(tag), `Invalid BCP47 language tag in ${key}: ${JSON.stringify(tag)} (RFC8414-2)`)) continue;
      ctx.warn(tag === canonicalCase(tag as string), `${key}: '${tag}' should be '${canonicalCase(tag as string)}' to match BCP47 canonical casing`);
    }
  }
}

function canonicalCase(tag: string): string {
  return tag.split('-').map((part, index) => {
    if (index === 0) return part.toLowerCase();
    if (part.length === 4 && /^[a-z]+$/i.test(part)) return part[0]!.toUpperCase() + part.slice(1).toLowerCase();
    if (part.length === 2) return part.toUpperCase();
    return part.toLowerCase();
  }).join('-');
}

/** EnsureServerConfigurationCodeChallengeMethodsSupportedIsAnArray: absent or empty is fine (PKCE is optional in OIDC). */
function checkCodeChallengeMethods(check: Check, metadata: ProviderMetadata): void {
  const methods = metadata.code_challenge_methods_supported;
  if (methods === undefined || (Array.isArray(methods) && methods.length === 0)) return;
  checkListed(check, metadata, 'code_challenge_methods_supported', ['S256', 'plain'], 1, 'code_challenge_methods_supported lists neither S256 nor plain (RFC7636-4.3)');
}
