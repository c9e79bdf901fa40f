import type { ModuleContext } from '../context.ts';
import { FAPI2_ALLOWED_ALGS } from '../client/fapi2_client.ts';
import { discoveryUrl, fetchMetadata, stringList, type ProviderMetadata } from '../client/provider.ts';
import { schemaProblems } from '../checks/server_metadata_schema.ts';
import { isHttpsOrLoopback, HTTPS_RULE } from '../checks/urls.ts';
import type { ConformanceModule } from '../module.ts';

/**
 * FAPI2SPFinalDiscoveryEndpointVerification (AbstractFAPI2SPFinalDiscoveryEndpointVerification) for
 * plain_fapi, private_key_jwt, DPoP, plain responses, openid_connect: the OpenID and RFC 8414
 * basics, then what FAPI 2.0 requires the document to say.
 */
export const fapi2Discovery: ConformanceModule = {
  name: 'fapi2-security-profile-final-discovery-end-point-verification',
  summary: 'discovery: response type code, iss in responses, PAR, private_key_jwt and DPoP with FAPI 2.0 algorithms, S256, openid',
  async run(ctx: ModuleContext) {
    const { url, metadata, exchange } = await fetchMetadata(ctx);
    const check = (ok: boolean, message: string) => ctx.check(ok, message, exchange);
    const list = (key: string) => stringList(metadata, key);
    const someAllowed = (key: string) => (list(key) ?? []).some((alg) => FAPI2_ALLOWED_ALGS.includes(alg));

    // CheckDiscEndpointDiscoveryUrl, CheckDiscEndpointIssuer, CheckDiscEndpointIssuerIsValidUrl, ValidateServerMetadataAgainstSchema.
    check(url === discoveryUrl(String(metadata.issuer)), `the issuer ${String(metadata.issuer)} does not match where the document was fetched (${url}) (OIDCD-4.3)`);
    check(typeof metadata.issuer === 'string' && URL.canParse(metadata.issuer) && !metadata.issuer.includes('?') && !metadata.issuer.includes('#'), 'issuer is not a valid URL without query or fragment (RFC8414-2)');
    for (const problem of schemaProblems(metadata)) check(false, `${problem} (RFC8414-2)`);

    // FAPI 2.0 for the authorization code flow.
    check((list('response_types_supported') ?? []).includes('code'), 'response_types_supported does not contain code (FAPI2-SP-FINAL-5.3.2.2-1)');
    check(metadata.authorization_response_iss_parameter_supported === true, 'authorization_response_iss_parameter_supported is not true (OAuth2-iss-3, FAPI2-SP-FINAL-5.3.2.2-7)');
    checkUrl(ctx, metadata, 'pushed_authorization_request_endpoint', 'PAR-5, FAPI2-SP-FINAL-5.3.2.2-2');
    const requirePar = metadata.require_pushed_authorization_requests;
    check(requirePar === undefined || typeof requirePar === 'boolean', `require_pushed_authorization_requests is not a boolean (${JSON.stringify(requirePar)}) (PAR-5)`);
    checkUrl(ctx, metadata, 'authorization_endpoint', 'OIDCD-3');
    checkUrl(ctx, metadata, 'token_endpoint', 'OIDCD-3');
    checkUrl(ctx, metadata, 'jwks_uri', 'OIDCD-3');

    // DPoP, ID tokens, client authentication: at least one algorithm FAPI 2.0 allows (5.4-1).
    check(someAllowed('dpop_signing_alg_values_supported'), `dpop_signing_alg_values_supported (${JSON.stringify(list('dpop_signing_alg_values_supported'))}) contains none of ${FAPI2_ALLOWED_ALGS.join(', ')} (FAPI2-SP-FINAL-5.4-1)`);
    check(someAllowed('id_token_signing_alg_values_supported'), `id_token_signing_alg_values_supported contains none of ${FAPI2_ALLOWED_ALGS.join(', ')} (FAPI2-SP-FINAL-5.4-1)`);
    check((list('token_endpoint_auth_methods_supported') ?? []).includes('private_key_jwt'), 'token_endpoint_auth_methods_supported does not contain private_key_jwt (FAPI2-SP-FINAL-5.3.2.1-6)');
    check(someAllowed('token_endpoint_auth_signing_alg_values_supported'), `token_endpoint_auth_signing_alg_values_supported contains none of ${FAPI2_ALLOWED_ALGS.join(', ')} (FAPI2-SP-FINAL-5.4-1)`);
    if (metadata.userinfo_signing_alg_values_supported !== undefined) {
      check(someAllowed('userinfo_signing_alg_values_supported'), `userinfo_signing_alg_values_supported contains none of ${FAPI2_ALLOWED_ALGS.join(', ')} (FAPI2-SP-FINAL-5.4)`);
    }
    check((list('code_challenge_methods_supported') ?? []).includes('S256'), 'code_challenge_methods_supported does not contain S256 (FAPI2-SP-FINAL-5.3.2.2-5)');

    // OidcDiscoveryEndpointChecks.
    check((list('scopes_supported') ?? []).includes('openid'), 'scopes_supported does not contain openid');
    check((list('subject_types_supported') ?? []).length > 0, 'subject_types_supported is missing or empty (OIDCD-3)');
  },
};

function checkUrl(ctx: ModuleContext, metadata: ProviderMetadata, key: string, spec: string): void {
  const value = metadata[key];
  ctx.check(typeof value === 'string' && URL.canParse(value) && isHttpsOrLoopback(value), `${key} is missing or not a URL using ${HTTPS_RULE} (${spec}): ${JSON.stringify(value)}`);
}
