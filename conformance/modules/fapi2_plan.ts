import type { ConformanceModule } from '../module.ts';
import { fapi2ClaimsParameterIdentityClaims } from './fapi2_claims.ts';
import { fapi2Discovery } from './fapi2_discovery.ts';
import { fapi2DpopNegative, fapi2DpopProofNbfExp } from './fapi2_dpop.ts';
import { fapi2ExpiredCode, fapi2ExpiredRequestUri } from './fapi2_expiry.ts';
import {
  fapi2HappyFlow, fapi2LongNonce, fapi2LongState, fapi2OtherScopeOrder, fapi2TokenTypeCase, fapi2UserRejects, fapi2With64CharNonce, fapi2WithoutDuplicateParameters, fapi2WithoutNonce, fapi2WithoutState,
} from './fapi2_happy_flows.ts';
import {
  fapi2AssertionNbf8SecondsFuture, fapi2AssertionNbfOver60SecondsFuture, fapi2DifferentNonceOutside, fapi2DifferentStateOutside, fapi2ParArrayAudience, fapi2ParEndpointAudience,
  fapi2ParInvalidHttpMethod, fapi2PkceRequired, fapi2PlainPkceRejected, fapi2RedirectUriInAuthorizationRequest, fapi2RequestUriInParForm, fapi2RequestUriOtherClient,
  fapi2RequestWithoutRedirectUri, fapi2ResponseTypeCodeIdToken, fapi2ResponseTypeToken, fapi2ReuseRequestUri, fapi2ReusedRequestUriBeforeCompletion, fapi2StateOnlyOutside,
  fapi2TokenEndpointAudience, fapi2TolerateUnregisteredRedirectUri, fapi2WithoutPar,
} from './fapi2_par.ts';
import {
  fapi2AssertionExpired, fapi2AssertionNoSub, fapi2AssertionRs256, fapi2AssertionWrongAud, fapi2ClientAssertionInTokenEndpoint, fapi2ClientIdInTokenEndpoint, fapi2CodeBoundToClient,
  fapi2CodeVerifierRequired, fapi2DpopIat10After, fapi2DpopIat10Before, fapi2DpopJktBinding, fapi2DpopProofAtParBinding, fapi2HolderOfKeyRequired, fapi2IncorrectCodeVerifier,
  fapi2MismatchedDpopJkt, fapi2RefreshToken, fapi2ReuseCodeAfterOneSecond, fapi2TokenMismatchedDpopJkt, fapi2TokenMismatchedProofJkt,
} from './fapi2_token_endpoint.ts';

/**
 * FAPI2SPFinalTestPlan (`fapi2-security-profile-final-test-plan`) in the suite's order, for the
 * variants client_auth_type=private_key_jwt, sender_constrain=dpop, fapi_profile=plain_fapi,
 * fapi_request_method=unsigned, fapi_response_mode=plain_response, openid=openid_connect: the
 * modules of FAPI2MessageSigningFinalTestPlan less those that need signed request objects
 * (FAPI2SPFinalTestPlan.fapi2SPtestModules), and less those the suite marks not applicable to
 * plain_fapi or to unsigned requests (the UK, Australian and Brazilian profiles' own modules,
 * fapi2-security-profile-final-ensure-registered-redirect-uri,
 * -ensure-request-object-with-nbf-8-seconds-in-the-future-is-accepted).
 */
export const FAPI2_MODULES: ConformanceModule[] = [
  fapi2Discovery, fapi2HappyFlow, fapi2UserRejects, fapi2WithoutState, fapi2WithoutNonce, fapi2With64CharNonce, fapi2OtherScopeOrder,
  fapi2ClaimsParameterIdentityClaims, fapi2TokenTypeCase,
  fapi2DpopProofNbfExp, fapi2DpopIat10Before, fapi2DpopIat10After,
  fapi2MismatchedDpopJkt, fapi2TokenMismatchedProofJkt, fapi2TokenMismatchedDpopJkt, fapi2DpopProofAtParBinding, fapi2DpopJktBinding,
  fapi2DifferentNonceOutside, fapi2DifferentStateOutside, fapi2LongNonce, fapi2LongState,
  fapi2StateOnlyOutside, fapi2RequestWithoutRedirectUri,
  fapi2TolerateUnregisteredRedirectUri, fapi2WithoutPar, fapi2RedirectUriInAuthorizationRequest, fapi2ResponseTypeCodeIdToken, fapi2ResponseTypeToken,
  fapi2ClientIdInTokenEndpoint, fapi2HolderOfKeyRequired, fapi2CodeBoundToClient, fapi2ReuseCodeAfterOneSecond, fapi2ExpiredCode,
  fapi2AssertionRs256, fapi2ClientAssertionInTokenEndpoint, fapi2AssertionExpired, fapi2AssertionWrongAud, fapi2AssertionNoSub,
  fapi2DpopNegative, fapi2RefreshToken,
  fapi2ReusedRequestUriBeforeCompletion, fapi2ReuseRequestUri, fapi2ExpiredRequestUri, fapi2AssertionNbf8SecondsFuture, fapi2AssertionNbfOver60SecondsFuture,
  fapi2RequestUriOtherClient, fapi2RequestUriInParForm, fapi2ParInvalidHttpMethod,
  fapi2PkceRequired, fapi2CodeVerifierRequired, fapi2IncorrectCodeVerifier, fapi2PlainPkceRejected,
  fapi2WithoutDuplicateParameters,
  fapi2ParArrayAudience, fapi2ParEndpointAudience, fapi2TokenEndpointAudience,
];
