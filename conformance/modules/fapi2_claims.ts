import type { ModuleContext } from '../context.ts';
import { stringList } from '../client/provider.ts';
import { idTokenIdentityClaims, standardClaimProblems, updatedAtProblem } from '../checks/standard_claims.ts';
import { checkSameSub } from '../checks/userinfo.ts';
import { jsonObject, mediaType } from '../http/http_client.ts';
import { acceptTokens, callResource, fapiCode, fapiRequest, fapiSetUp, redeem } from '../flows/fapi2_flow.ts';
import type { ConformanceModule } from '../module.ts';

/** AddAllSupportedStandardClaimsToAuthorizationEndpointRequestIdTokenAndUserinfoClaims.oidcClaims: OpenID Connect Core 5.1. */
const OIDC_CLAIMS = [
  'name', 'given_name', 'family_name', 'middle_name', 'nickname', 'preferred_username', 'profile', 'picture', 'website', 'email', 'email_verified',
  'gender', 'birthdate', 'zoneinfo', 'locale', 'phone_number', 'phone_number_verified', 'address', 'updated_at',
];

/**
 * FAPI2SPFinalTestClaimsParameterIdentityClaims: every standard claim the OP lists in
 * claims_supported asked for with the claims parameter, for the ID token and userinfo; userinfo
 * called with the DPoP-bound token. Skipped when the OP does not offer the claims parameter or
 * lists no standard claim. Its random "location" claims the OP should ignore are not sent.
 */
export const fapi2ClaimsParameterIdentityClaims: ConformanceModule = {
  name: 'fapi2-security-profile-final-test-claims-parameter-identity-claims',
  summary: 'every standard claim in claims_supported asked for with the claims parameter (ID token and userinfo): returned with the right types, same sub (missing ones a warning)',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const { metadata } = session.provider;
    if (metadata.claims_parameter_supported !== undefined && typeof metadata.claims_parameter_supported !== 'boolean') ctx.fail("'claims_parameter_supported' in the server metadata is not a boolean");
    if (metadata.claims_parameter_supported !== true) {
      ctx.notSupported("The 'claims_parameter_supported' server metadata indicates that it does not support the claims parameter (which is permitted behaviour), so claims behaviour cannot be tested.");
    }
    const supported = (stringList(metadata, 'claims_supported') ?? []).filter((claim) => OIDC_CLAIMS.includes(claim));
    if (supported.length === 0) {
      ctx.notSupported("The 'claims_supported' server metadata does not contain any standard OpenID Connect claims (which is permitted behaviour), and means claims behaviour cannot be tested.");
    }
    const requested = Object.fromEntries(supported.map((claim) => [claim, null]));
    const request = fapiRequest(session, { extra: { claims: JSON.stringify({ id_token: requested, userinfo: requested }) } });
    const code = await fapiCode(ctx, session, request);
    const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
    const identity: Record<string, unknown> = idTokenIdentityClaims(tokens.idToken!.claims as Record<string, unknown>);

    const response = await callResource(ctx, session, tokens);
    ctx.check(mediaType(response) === 'application/json', `userinfo answered with Content-Type ${response.headers.get('content-type')}, expected application/json (OIDCC-5.3.2)`);
    const userinfo = jsonObject(response);
    ctx.require(userinfo !== undefined, 'the userinfo response is not a JSON object (OIDCC-5.3.2)');
    for (const problem of standardClaimProblems(userinfo)) ctx.check(false, `userinfo: ${problem} (OIDCC-5.1)`);
    ctx.check(typeof userinfo.sub === 'string' && userinfo.sub !== '', 'userinfo has no sub (OIDCC-5.3.2)');
    const updatedAt = updatedAtProblem(userinfo, 'userinfo');
    if (updatedAt) ctx.check(false, `${updatedAt} (OIDCC-5.1)`);
    checkSameSub(ctx, userinfo, tokens.idToken!.claims.sub);
    Object.assign(identity, userinfo);

    // EnsureIdentityClaimsContainRequestedClaims, a warning.
    const missing = supported.filter((claim) => !(claim in identity));
    ctx.warn(missing.length === 0, `The server did not return all the requested claims (the ID token and userinfo combined); missing: ${missing.join(', ')} (OIDCC-5.5)`);
  },
};
