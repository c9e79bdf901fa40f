import type { ConformanceModule } from './module.ts';
import { acrValues, claimsEssential } from './modules/claims.ts';
import { codeReuse, codeReuse30Seconds } from './modules/code_reuse.ts';
import { discoveryEndpointVerification } from './modules/discovery.ts';
import { claimsLocales, clientSecretPost, displayPage, displayPopup, loginHint, postRequest, serverHappyFlow, uiLocales, unknownParameter, validPkce, withoutNonce } from './modules/happy_flows.ts';
import { idTokenRs256, idTokenSignature, idTokenUnsigned } from './modules/id_tokens.ts';
import { serverRotateKeys } from './modules/key_rotation.ts';
import { maxAge1, maxAge10000 } from './modules/max_age.ts';
import { clientAssertionIssAud, refreshTokenRpKeyRotation, registrationJwksUri, registrationSectorBad, registrationSectorUri, requestUriSignedRs256, requestUriUnsigned } from './modules/out_of_scope.ts';
import { idTokenHint, promptLogin, promptNoneLoggedIn, promptNoneNotLoggedIn } from './modules/prompt.ts';
import { redirectUriInRequest, redirectUriQueryAdded, redirectUriQueryMismatch, redirectUriQueryOk, redirectUriRegFrag, registeredRedirectUri } from './modules/redirect_uri.ts';
import { refreshToken } from './modules/refresh_token.ts';
import { logoUri, policyUri, tosUri } from './modules/registration.ts';
import { requestObjectRedirectUri, unsignedRequestObjectModule, unsignedRequestUri } from './modules/request_objects.ts';
import { responseTypeMissing } from './modules/response_type.ts';
import { alternateHappyFlow, scopeAddress, scopeAll, scopeEmail, scopePhone, scopeProfile } from './modules/scopes.ts';
import { userinfoGet, userinfoPostBody, userinfoPostHeader, userinfoRs256 } from './modules/userinfo.ts';
import { FAPI2_MODULES } from './modules/fapi2_plan.ts';
import { RP_INITIATED_LOGOUT_MODULES } from './modules/rp_initiated_logout.ts';

export const BASIC_PLAN = 'oidcc-basic-certification-test-plan';
export const FORMPOST_BASIC_PLAN = 'oidcc-formpost-basic-certification-test-plan';
export const CONFIG_PLAN = 'oidcc-config-certification-test-plan';
export const DYNAMIC_PLAN = 'oidcc-dynamic-certification-test-plan';
export const FAPI2_PLAN = 'fapi2-security-profile-final-test-plan';
export const RP_INITIATED_LOGOUT_PLAN = 'oidcc-rp-initiated-logout-certification-test-plan';
export const PLAN_NAMES = [BASIC_PLAN, FORMPOST_BASIC_PLAN, CONFIG_PLAN, DYNAMIC_PLAN, FAPI2_PLAN, RP_INITIATED_LOGOUT_PLAN] as const;
export type PlanName = typeof PLAN_NAMES[number];
/**
 * What `npm run conformance` runs unless told otherwise. The dynamic plan is opt-in: the Dynamic
 * OP profile requires the implicit flow (response types `id_token`, `token id_token`), which this
 * server refuses by design (RFC 9700 2.1.2), so its discovery module fails against it. The FAPI 2.0
 * plan is opt-in too: it needs FAPI clients (FAPI=on, or an initial access token made with --fapi).
 * So are the form post plan, the basic plan's modules again with `response_mode=form_post`, and
 * the RP-initiated logout plan.
 */
export const DEFAULT_PLANS: readonly PlanName[] = [BASIC_PLAN, CONFIG_PLAN];

export interface PlanEntry {
  plan: PlanName;
  module: ConformanceModule;
  /** How the plan's authorization requests ask for the answer: the suite's response_mode variant. */
  responseMode: ResponseMode;
}

/** `default`: the response type's own (the query, for code); `form_post`: OAuth 2.0 Form Post Response Mode. */
export type ResponseMode = 'default' | 'form_post';

/** OIDCCBasicTestPlan's modules, in its order. */
const BASIC_MODULES: ConformanceModule[] = [
  serverHappyFlow, responseTypeMissing, idTokenSignature, idTokenUnsigned, userinfoGet, userinfoPostHeader, userinfoPostBody,
  withoutNonce, scopeProfile, scopeEmail, scopeAddress, scopePhone, scopeAll, alternateHappyFlow, displayPage, displayPopup,
  promptLogin, promptNoneNotLoggedIn, promptNoneLoggedIn, maxAge1, maxAge10000, unknownParameter, idTokenHint, loginHint,
  uiLocales, claimsLocales, acrValues, codeReuse, codeReuse30Seconds, registeredRedirectUri, postRequest, clientSecretPost,
  unsignedRequestUri, unsignedRequestObjectModule, claimsEssential, requestObjectRedirectUri, refreshToken, validPkce,
];

/**
 * The plans' modules in the suite's order (OIDCCBasicTestPlan, OIDCCFormPostBasicTestPlan,
 * OIDCCConfigTestPlan, OIDCCDynamicTestPlan, FAPI2SPFinalTestPlan, OIDCCRpInitiatedLogoutTestPlan). The basic plan runs with response_type code and client_secret_basic
 * (client_secret_post for oidcc-server-client-secret-post), the form post plan the same modules
 * with response_mode=form_post (planEntries, ModuleContext.responseMode); the dynamic plan's private_key_jwt
 * variant is replaced by client_secret_basic, since no module kept here depends on it. The FAPI
 * 2.0 plan runs with private_key_jwt, DPoP, plain_fapi, unsigned (PAR) requests, plain responses
 * and openid_connect (conformance/modules/fapi2_plan.ts).
 */
export const PLANS: Record<PlanName, ConformanceModule[]> = {
  [BASIC_PLAN]: BASIC_MODULES,
  // OIDCCFormPostBasicTestPlan: changeResponseTypeToFormPost(OIDCCBasicTestPlan's modules).
  [FORMPOST_BASIC_PLAN]: BASIC_MODULES,
  [CONFIG_PLAN]: [discoveryEndpointVerification('static_client')],
  [DYNAMIC_PLAN]: [
    idTokenRs256, idTokenUnsigned, userinfoRs256, redirectUriInRequest, redirectUriQueryOk, redirectUriQueryMismatch,
    redirectUriQueryAdded, redirectUriRegFrag, discoveryEndpointVerification('dynamic_client'), serverHappyFlow, logoUri, policyUri,
    tosUri, registrationJwksUri, registrationSectorUri, registrationSectorBad, serverRotateKeys, refreshTokenRpKeyRotation,
    requestUriUnsigned, requestUriSignedRs256, requestObjectRedirectUri, refreshToken, clientAssertionIssAud,
  ],
  [FAPI2_PLAN]: FAPI2_MODULES,
  [RP_INITIATED_LOGOUT_PLAN]: RP_INITIATED_LOGOUT_MODULES,
};

/** Short names accepted for --plan. */
export const PLAN_ALIASES: Record<string, PlanName> = { basic: BASIC_PLAN, formpost: FORMPOST_BASIC_PLAN, config: CONFIG_PLAN, dynamic: DYNAMIC_PLAN, fapi2: FAPI2_PLAN, logout: RP_INITIATED_LOGOUT_PLAN };

export function planEntries(plans: readonly PlanName[], modules: readonly string[]): PlanEntry[] {
  return plans.flatMap((plan) => PLANS[plan]
    .filter((module) => modules.length === 0 || modules.includes(module.name))
    .map((module) => ({ plan, module, responseMode: plan === FORMPOST_BASIC_PLAN ? 'form_post' : 'default' })));
}

export function moduleNames(): string[] {
  return [...new Set(Object.values(PLANS).flat().map((module) => module.name))];
}
