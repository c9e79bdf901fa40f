import type { ModuleContext } from '../context.ts';
import type { RequestOptions } from '../client/authorization_request.ts';
import { authorizeWith, checkTokenEndpointHashes, expectCode, happyFlow, redeemCode, requestProtectedResource, setUp, standardChecks, type SetUpOptions } from '../flows/code_flow.ts';
import { MINIMUM_ENTROPY_BITS, MINIMUM_LENGTH_BITS, lengthBits, shannonBits } from '../checks/entropy.ts';
import { warnNameInIdToken, warnNonRequestedClaims } from '../checks/id_token_extras.ts';
import type { ConformanceModule } from '../module.ts';

/**
 * OIDCCServerTest: the happy flow, plus the code's length and entropy, a warning for name or
 * non-requested claims in the ID token, and at_hash/c_hash checked when present.
 */
function serverTest(name: string, summary: string, setUpOptions: SetUpOptions = {}): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await setUp(ctx, name, setUpOptions);
      const front = await authorizeWith(ctx, session);
      const code = expectCode(ctx, session, front);
      ctx.check(lengthBits(code) >= MINIMUM_LENGTH_BITS, `Authorization code is not long enough: ${lengthBits(code)} bits, required ${MINIMUM_LENGTH_BITS} (RFC6749-10.10)`);
      ctx.check(shannonBits(code) > MINIMUM_ENTROPY_BITS, `the authorization code's estimated entropy is ${shannonBits(code).toFixed(0)} bits, required more than ${MINIMUM_ENTROPY_BITS} (RFC6749-10.10)`);
      const tokens = await redeemCode(ctx, session, code, front.request, async (idToken, { token, accessToken }) => {
        await standardChecks(ctx, session, front.request)(idToken, { token, accessToken });
        warnNameInIdToken(ctx, idToken);
        ctx.warn(token.body?.expires_in !== undefined, 'expires_in is missing from the token endpoint response (RFC6749-5.1 recommends it)');
        checkTokenEndpointHashes(ctx, idToken, accessToken, code);
      });
      await requestProtectedResource(ctx, session, tokens);
      warnNonRequestedClaims(ctx, tokens.idToken, front.request.params.scope ?? '');
    },
  };
}

/** AbstractOIDCCServerTest with one change to the request: it must simply succeed. */
function happyFlowWith(name: string, summary: string, request: RequestOptions): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await setUp(ctx, name);
      await happyFlow(ctx, session, { request });
    },
  };
}

export const serverHappyFlow = serverTest('oidcc-server', 'the happy flow: register, authorize, code, tokens, ID token checks, userinfo; code length and entropy');

export const clientSecretPost = serverTest('oidcc-server-client-secret-post', 'the happy flow with client_secret_post at the token endpoint', { authMethod: 'client_secret_post' });

export const withoutNonce: ConformanceModule = {
  name: 'oidcc-ensure-request-without-nonce-succeeds-for-code-flow',
  summary: 'a code flow request without nonce must still be given a code (the token endpoint is not called)',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const front = await authorizeWith(ctx, session, { withoutNonce: true });
    expectCode(ctx, session, front);
  },
};

export const unknownParameter = happyFlowWith('oidcc-ensure-request-with-unknown-parameter-succeeds', 'extra=foobar in the request must be ignored (RFC 6749 3.1)', { extra: { extra: 'foobar' } });
export const displayPage = happyFlowWith('oidcc-display-page', 'display=page must not cause an error', { extra: { display: 'page' } });
export const displayPopup = happyFlowWith('oidcc-display-popup', 'display=popup must not cause an error', { extra: { display: 'popup' } });
export const uiLocales = happyFlowWith('oidcc-ui-locales', 'ui_locales=se must not cause an error', { extra: { ui_locales: 'se' } });
export const claimsLocales = happyFlowWith('oidcc-claims-locales', 'claims_locales=se must not cause an error', { extra: { claims_locales: 'se' } });

export const loginHint: ConformanceModule = {
  name: 'oidcc-login-hint',
  summary: 'login_hint=buffy@<issuer host> must not cause an error',
  async run(ctx: ModuleContext) {
    const host = new URL(ctx.target.issuer).hostname;
    const session = await setUp(ctx, this.name);
    await happyFlow(ctx, session, { request: { extra: { login_hint: `buffy@${host}` } } });
  },
};

export const validPkce = happyFlowWith('oidcc-ensure-request-with-valid-pkce-succeeds', 'a request with valid PKCE (S256) must succeed, the verifier sent to the token endpoint', { pkce: true });

export const postRequest: ConformanceModule = {
  name: 'oidcc-ensure-post-request-succeeds',
  summary: 'the authorization request sent as a POST form must succeed (OIDCC 3.1.2.1)',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const front = await authorizeWith(ctx, session, {}, { method: 'POST' });
    // The suite waits 30 s for the redirect; none is a warning (ExpectRedirectUriHasBeenCalled), not a failure.
    if (front.journey.landing.kind === 'page') {
      ctx.warn(false, `the OP did not call the redirect_uri after a POST to the authorization endpoint (it answered ${front.journey.landing.response.status}); OIDCC 3.1.2.1: Authorization Servers MUST support GET and POST at the Authorization Endpoint`);
      return;
    }
    const code = expectCode(ctx, session, front);
    const tokens = await redeemCode(ctx, session, code, front.request);
    await requestProtectedResource(ctx, session, tokens);
  },
};
