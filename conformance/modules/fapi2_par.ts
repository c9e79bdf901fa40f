import type { ModuleContext } from '../context.ts';
import { assertionForm, registerFapiClient, type AssertionOptions } from '../client/fapi2_client.ts';
import { callbackParams } from '../checks/authorization_response.ts';
import {
  acceptTokens, authorizeByReference, browse, callResource, checkAuthorizationError, checkEndpointError, expectFapiCode, expectRequestUri, fapiCode, fapiRequest, fapiSetUp, push, redeem,
  type FapiSession,
} from '../flows/fapi2_flow.ts';
import type { ConformanceModule } from '../module.ts';

/** The rest of the flow once a code is in hand: tokens and the resource. */
async function finish(ctx: ModuleContext, session: FapiSession, code: string, request: ReturnType<typeof fapiRequest>): Promise<void> {
  const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
  await callResource(ctx, session, tokens);
}

export const fapi2ReusedRequestUriBeforeCompletion: ConformanceModule = {
  name: 'fapi2-security-profile-final-par-ensure-reused-request-uri-prior-to-auth-completion-succeeds',
  summary: 'the request_uri opened twice before the user finishes (a reload): the second completes the flow',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const requestUri = expectRequestUri(ctx, await push(ctx, session, request));
    const url = new URL(session.provider.metadata.authorization_endpoint!);
    url.search = new URLSearchParams({ client_id: session.client.clientId, request_uri: requestUri }).toString();
    // The first visit reaches the login page and goes no further, as a browser whose user reloads.
    await session.agent.request(url.href);
    const code = expectFapiCode(ctx, session, await browse(ctx, session, url.href), request);
    await finish(ctx, session, code, request);
  },
};

export const fapi2ReuseRequestUri: ConformanceModule = {
  name: 'fapi2-security-profile-final-par-attempt-reuse-request_uri',
  summary: 'the request_uri used again after a completed authorization: refused (invalid_request_uri or an error page)',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const requestUri = expectRequestUri(ctx, await push(ctx, session, request));
    const code = expectFapiCode(ctx, session, await authorizeByReference(ctx, session, requestUri), request);
    await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
    const again = await authorizeByReference(ctx, session, requestUri);
    checkAuthorizationError(ctx, session, again, undefined, ['invalid_request_uri'], 'PAR-2.2, PAR-4');
  },
};

/** PAR with a client assertion the OP must refuse: 401 (or 400) invalid_client. */
function parAssertionFails(name: string, summary: string, assertion: (session: FapiSession) => AssertionOptions): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await fapiSetUp(ctx, name);
      const pushed = await push(ctx, session, fapiRequest(session), { proof: false, assertion: assertion(session) });
      checkEndpointError(ctx, pushed, [400, 401], ['invalid_client', 'invalid_request'], 'RFC7523-3, FAPI2-SP-FINAL-5.3.2.1');
    },
  };
}

const now = () => Math.floor(Date.now() / 1000);

export const fapi2AssertionNbf8SecondsFuture: ConformanceModule = {
  name: 'fapi2-security-profile-final-par-ensure-jwt-client-assertions-nbf-8-seconds-in-the-future-is-accepted',
  summary: 'a client assertion with iat and nbf 8 s in the future at PAR: accepted (clock skew), the flow completes',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const future = now() + 8;
    const code = await fapiCode(ctx, session, request, { proof: false, assertion: { claims: { iat: future, nbf: future, exp: future + 60 } } });
    await finish(ctx, session, code, request);
  },
};

export const fapi2AssertionNbfOver60SecondsFuture = parAssertionFails(
  'fapi2-security-profile-final-par-ensure-jwt-client-assertions-nbf-over-60-seconds-in-the-future-fails',
  'a client assertion with iat and nbf 70 s in the future at PAR: invalid_client',
  () => { const future = now() + 70; return { claims: { iat: future, nbf: future, exp: future + 60 } }; },
);

export const fapi2ParArrayAudience = parAssertionFails(
  'fapi2-security-profile-final-par-test-array-as-audience-fails',
  'a client assertion whose aud is an array (the issuer and the PAR endpoint): invalid_client',
  (session) => ({ claims: { aud: [session.provider.metadata.issuer, session.provider.metadata.pushed_authorization_request_endpoint] } }),
);

export const fapi2ParEndpointAudience = parAssertionFails(
  'fapi2-security-profile-final-par-test-par-endpoint-url-as-audience-fails',
  'a client assertion whose aud is the PAR endpoint URL: invalid_client (FAPI 2.0: the issuer only)',
  (session) => ({ claims: { aud: session.provider.metadata.pushed_authorization_request_endpoint } }),
);

export const fapi2TokenEndpointAudience = parAssertionFails(
  'fapi2-security-profile-final-par-test-token-endpoint-url-as-audience-fails',
  'a client assertion whose aud is the token endpoint URL: invalid_client (FAPI 2.0: the issuer only)',
  (session) => ({ claims: { aud: session.provider.metadata.token_endpoint } }),
);

export const fapi2RequestUriOtherClient: ConformanceModule = {
  name: 'fapi2-security-profile-final-par-attempt-to-use-request_uri-for-different-client',
  summary: 'a request_uri pushed by one client, used with another client_id: refused',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const second = await registerFapiClient(ctx, session.provider, `${this.name} 2`);
    const requestUri = expectRequestUri(ctx, await push(ctx, session, fapiRequest(session)));
    const journey = await authorizeByReference(ctx, { ...session, client: second }, requestUri);
    checkAuthorizationError(ctx, session, journey, undefined, ['invalid_request', 'invalid_request_object', 'invalid_request_uri'], 'PAR-2.2, PAR-4');
  },
};

export const fapi2RequestUriInParForm: ConformanceModule = {
  name: 'fapi2-security-profile-final-par-authorization-request-containing-request_uri-form-param',
  summary: 'a pushed request that itself carries request_uri: 400 invalid_request, invalid_request_object or request_uri_not_supported (PAR-2.1)',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const pushed = await push(ctx, session, fapiRequest(session, { extra: { request_uri: 'urn:ietf:params:oauth:request_uri:conformance' } }));
    checkEndpointError(ctx, pushed, [400], ['invalid_request', 'invalid_request_object', 'request_uri_not_supported'], 'PAR-2.1-2');
  },
};

export const fapi2ParInvalidHttpMethod: ConformanceModule = {
  name: 'fapi2-security-profile-final-par-attempt-invalid-http-method',
  summary: 'the pushed request sent with PUT: an HTTP error (4xx or 5xx)',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const form = { ...fapiRequest(session).params, ...await assertionForm(session.client, session.provider) };
    const response = await ctx.http.send({
      method: 'PUT', url: session.provider.metadata.pushed_authorization_request_endpoint as string,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: new URLSearchParams(form).toString(),
    });
    ctx.check(response.status >= 400 && response.status < 600, `the PAR endpoint answered a PUT with ${response.status}, expected an HTTP error, 4xx or 5xx (PAR-2.3)`);
  },
};

/** A pushed request the OP must refuse at PAR, or by an error at the authorization endpoint. */
function refusedRequest(name: string, summary: string, options: Parameters<typeof fapiRequest>[1], errors: string[], spec: string): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await fapiSetUp(ctx, name);
      const request = fapiRequest(session, options);
      const pushed = await push(ctx, session, request);
      if (pushed.response.status !== 201) {
        checkEndpointError(ctx, pushed, [400], errors, spec);
        return;
      }
      const journey = await authorizeByReference(ctx, session, expectRequestUri(ctx, pushed));
      checkAuthorizationError(ctx, session, journey, request, errors, spec);
    },
  };
}

export const fapi2PkceRequired = refusedRequest(
  'fapi2-security-profile-final-par-ensure-pkce-required', 'a pushed request without PKCE: refused with invalid_request',
  { pkce: false }, ['invalid_request'], 'FAPI2-SP-FINAL-5.3.2.2-5',
);

export const fapi2PlainPkceRejected = refusedRequest(
  'fapi2-security-profile-final-par-plain-pkce-rejected', 'a pushed request with code_challenge_method plain: refused with invalid_request',
  { pkce: 'plain' }, ['invalid_request'], 'FAPI2-SP-FINAL-5.3.2.2-5',
);

export const fapi2RequestWithoutRedirectUri = refusedRequest(
  'fapi2-security-profile-final-ensure-request-object-without-redirect-uri-fails', 'a pushed request without redirect_uri: refused with invalid_request',
  { omit: ['redirect_uri'] }, ['invalid_request', 'invalid_request_object'], 'FAPI2-SP-FINAL-5.3.2.2, OIDCC-3.1.2.1',
);

export const fapi2RedirectUriInAuthorizationRequest = refusedRequest(
  'fapi2-security-profile-final-ensure-redirect-uri-in-authorization-request', 'a pushed request without redirect_uri: refused (FAPI 2.0 requires it)',
  { omit: ['redirect_uri'] }, ['invalid_request', 'invalid_request_object'], 'FAPI2-SP-FINAL-5.3.2.2',
);

export const fapi2ResponseTypeCodeIdToken = refusedRequest(
  'fapi2-security-profile-final-ensure-response-type-code-idtoken-fails', 'response_type code id_token: refused',
  { extra: { response_type: 'code id_token' } }, ['unsupported_response_type', 'invalid_request', 'unauthorized_client'], 'FAPI2-SP-FINAL-5.3.2.2-1',
);

export const fapi2ResponseTypeToken = refusedRequest(
  'fapi2-security-profile-final-ensure-response-type-token-fails', 'response_type token: refused',
  { extra: { response_type: 'token' } }, ['unsupported_response_type', 'invalid_request', 'unauthorized_client'], 'FAPI2-SP-FINAL-5.3.2.2-1',
);

export const fapi2TolerateUnregisteredRedirectUri: ConformanceModule = {
  name: 'fapi2-security-profile-final-plain-fapi-tolerate-unregistered-redirect-uri',
  summary: 'a pushed request with an unregistered redirect_uri: refused at PAR (invalid_request), or an error page; never a redirect',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session, { extra: { redirect_uri: `${session.client.redirectUri}/bad` } });
    const pushed = await push(ctx, session, request);
    if (pushed.response.status !== 201) {
      checkEndpointError(ctx, pushed, [400], ['invalid_request', 'invalid_request_object', 'invalid_redirect_uri'], 'PAR-2.3');
      return;
    }
    const journey = await authorizeByReference(ctx, session, expectRequestUri(ctx, pushed));
    ctx.check(journey.landing.kind === 'page', 'the OP redirected to the unregistered redirect_uri (PAR-2.1-3)');
  },
};

export const fapi2WithoutPar: ConformanceModule = {
  name: 'fapi2-security-profile-final-ensure-unsigned-authorization-request-without-using-par-fails',
  summary: 'the authorization request sent by value, not pushed: refused (FAPI 2.0 requires PAR)',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const url = new URL(session.provider.metadata.authorization_endpoint!);
    for (const [name, value] of Object.entries(request.params)) url.searchParams.set(name, value);
    const journey = await browse(ctx, session, url.href);
    checkAuthorizationError(ctx, session, journey, request, ['invalid_request'], 'FAPI2-SP-FINAL-5.3.2.2-2');
  },
};

/** Parameters on the authorization URL besides the request_uri: the pushed ones are the request (PAR-4). */
function outsideParameters(name: string, summary: string, pushedOptions: Parameters<typeof fapiRequest>[1], outside: Record<string, string>, check: (ctx: ModuleContext, params: Record<string, string>, request: ReturnType<typeof fapiRequest>) => void): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await fapiSetUp(ctx, name);
      const request = fapiRequest(session, pushedOptions);
      const journey = await authorizeByReference(ctx, session, expectRequestUri(ctx, await push(ctx, session, request)), { extra: outside });
      if (journey.landing.kind === 'redirect' && callbackParams(journey.landing).error !== undefined) {
        checkAuthorizationError(ctx, session, journey, request, ['invalid_request'], 'OIDCC-3.3.2.6');
        return;
      }
      const params = journey.landing.kind === 'redirect' ? callbackParams(journey.landing) : {};
      check(ctx, params, request);
      const code = expectFapiCode(ctx, session, journey, request);
      const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
      await callResource(ctx, session, tokens);
    },
  };
}

export const fapi2DifferentNonceOutside = outsideParameters(
  'fapi2-security-profile-final-ensure-different-nonce-inside-and-outside-request-object',
  'a different nonce on the authorization URL than pushed: the pushed one is used (in the ID token)',
  {}, { nonce: 'outside-nonce-value' },
  () => {},
);

export const fapi2DifferentStateOutside = outsideParameters(
  'fapi2-security-profile-final-ensure-different-state-inside-and-outside-request-object',
  'a different state on the authorization URL than pushed: the pushed one comes back',
  {}, { state: 'outside-state-value' },
  (ctx, params, request) => { ctx.check(params.state === request.state, `state in the response is ${JSON.stringify(params.state)}, expected the pushed ${request.state} (PAR-4)`); },
);

export const fapi2StateOnlyOutside = outsideParameters(
  'fapi2-security-profile-final-state-only-outside-request-object-not-used',
  'state only on the authorization URL, none pushed: no state comes back',
  { withoutState: true }, { state: 'outside-state-value' },
  (ctx, params) => { ctx.check(params.state === undefined, `state ${JSON.stringify(params.state)} came back, though only the authorization URL carried it (PAR-4)`); },
);
