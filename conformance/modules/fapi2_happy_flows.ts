import type { ModuleContext } from '../context.ts';
import { callbackParams } from '../checks/authorization_response.ts';
import { acceptTokens, authorizeByReference, callResource, checkAuthorizationError, expectFapiCode, expectRequestUri, fapiCode, fapiHappyFlow, fapiRequest, fapiSetUp, push, redeem, type FapiRequestOptions } from '../flows/fapi2_flow.ts';
import type { ConformanceModule } from '../module.ts';

/** A module that is AbstractFAPI2SPFinalServerTestModule's flow with a changed authorization request. */
function happyFlowWith(name: string, summary: string, options: FapiRequestOptions): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      await fapiHappyFlow(ctx, await fapiSetUp(ctx, name), options);
    },
  };
}

export const fapi2HappyFlow = happyFlowWith('fapi2-security-profile-final-happy-flow', 'PAR (private_key_jwt), PKCE S256, the code redeemed with DPoP: DPoP-bound tokens, an ID token in a FAPI algorithm, the resource called', {});

export const fapi2WithoutState = happyFlowWith('fapi2-security-profile-final-ensure-authorization-request-without-state-success', 'no state: the flow succeeds and no state comes back', { withoutState: true });

export const fapi2WithoutNonce = happyFlowWith('fapi2-security-profile-final-ensure-authorization-request-without-nonce-success', 'no nonce: the flow succeeds, the ID token carries none', { withoutNonce: true });

export const fapi2With64CharNonce = happyFlowWith('fapi2-security-profile-final-ensure-authorization-request-with-64-char-nonce-success', 'a 64-character nonce: it comes back in the ID token', { nonceLength: 64 });

export const fapi2OtherScopeOrder = happyFlowWith('fapi2-security-profile-final-ensure-other-scope-order-succeeds', 'the scope values in reverse order: the flow succeeds', { scope: 'api openid' });

export const fapi2WithoutDuplicateParameters = happyFlowWith('fapi2-security-profile-final-par-without-duplicate-parameters', 'the authorization request carries only client_id and request_uri: the flow succeeds', {});

/** ExpectRequestObjectWithLong*ErrorPage: a very long value, which the OP processes or refuses (invalid_request at PAR, an error to the client, a page). */
function longValue(name: string, summary: string, options: FapiRequestOptions): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await fapiSetUp(ctx, name);
      const request = fapiRequest(session, options);
      const pushed = await push(ctx, session, request);
      if (pushed.response.status !== 201) {
        ctx.check(pushed.response.status === 400 && pushed.body?.error === 'invalid_request', `the PAR endpoint refused the request with ${pushed.response.status} ${String(pushed.body?.error)}; a refusal must be 400 invalid_request (PAR-2.3)`, pushed.exchange);
        ctx.note('the OP refused the long value at the PAR endpoint, which the suite accepts');
        return;
      }
      const journey = await authorizeByReference(ctx, session, expectRequestUri(ctx, pushed));
      if (journey.landing.kind === 'redirect' && callbackParams(journey.landing).error !== undefined) {
        checkAuthorizationError(ctx, session, journey, request, ['invalid_request'], 'OIDCC-3.3.2.6');
        ctx.warn(false, 'the OP rejected the long value; it should accept it (FAPI2-SP-FINAL-5.3.2.2)');
        return;
      }
      const code = expectFapiCode(ctx, session, journey, request);
      const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
      await callResource(ctx, session, tokens);
    },
  };
}

export const fapi2LongState = longValue('fapi2-security-profile-final-ensure-authorization-request-with-long-state', 'a 1000-character state: returned as sent, or the request refused with invalid_request', { stateLength: 1000 });

export const fapi2LongNonce = longValue('fapi2-security-profile-final-ensure-authorization-request-with-long-nonce', 'a 384-character nonce: returned in the ID token, or the request refused with invalid_request', { nonceLength: 384 });

export const fapi2UserRejects: ConformanceModule = {
  name: 'fapi2-security-profile-final-user-rejects-authentication',
  summary: 'the user denies on the consent page: access_denied to the client, with state and iss',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session, { stateLength: 128 });
    const journey = await authorizeByReference(ctx, session, expectRequestUri(ctx, await push(ctx, session, request)), { deny: true });
    ctx.require(journey.landing.kind === 'redirect', 'the OP did not send the browser back to the client after the user denied (OIDCC-3.1.2.6)');
    checkAuthorizationError(ctx, session, journey, request, ['access_denied'], 'OIDCC-3.1.2.6, RFC6749-4.1.2.1');
  },
};

export const fapi2TokenTypeCase: ConformanceModule = {
  name: 'fapi2-security-profile-final-access-token-type-header-case-sensitivity',
  summary: 'the resource called with the Authorization scheme in inverted case (dPoP): accepted, schemes are case-insensitive',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const code = await fapiCode(ctx, session, request);
    const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
    const inverted = [...tokens.tokenType].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join('');
    await callResource(ctx, session, tokens, { scheme: inverted });
  },
};
