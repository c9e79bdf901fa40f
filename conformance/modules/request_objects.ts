import type { ModuleContext } from '../context.ts';
import { authorizationRequest, randomValue } from '../client/authorization_request.ts';
import { stringList, type Provider } from '../client/provider.ts';
import { REDIRECT_URI } from '../client/registration.ts';
import { requestObjectWire, unsignedRequestObject } from '../client/request_object.ts';
import { callbackParams } from '../checks/authorization_response.ts';
import { errorPageProblem, pageSummary } from '../checks/error_page.ts';
import { authorize, expectCode, redeemCode, redirectParams, requestProtectedResource, setUp, type FrontChannel, type Session } from '../flows/code_flow.ts';
import type { ConformanceModule } from '../module.ts';

/** AbstractOIDCCServerTest.skipTestIfNoneUnsupported. */
function skipUnlessNoneAllowed(ctx: ModuleContext, provider: Provider): void {
  const algs = stringList(provider.metadata, 'request_object_signing_alg_values_supported');
  if (algs !== undefined && !algs.includes('none')) ctx.notSupported("'none' is not listed in request_object_signing_alg_values_supported: unsigned request objects are not supported");
}

/**
 * The error the OP redirected back with, read as redirectParams reads an answer (a form post when
 * the request asked for one, as the suite's module checks); undefined for an error page.
 */
function answeredError(ctx: ModuleContext, front: FrontChannel): string | undefined {
  return front.journey.landing.kind === 'redirect' ? redirectParams(ctx, front).params.error : undefined;
}

/** The rest of the standard flow once the OP answered with a code. */
async function completeFlow(ctx: ModuleContext, session: Session, front: FrontChannel): Promise<void> {
  const code = expectCode(ctx, session, front);
  const tokens = await redeemCode(ctx, session, code, front.request);
  await requestProtectedResource(ctx, session, tokens);
}

/** CheckDiscEndpointRequestParameterSupported / ...RequestUriParameterSupported, as warnings. */
function warnUnlessAdvertised(ctx: ModuleContext, provider: Provider, key: string, absentMeans: boolean): void {
  const value = provider.metadata[key];
  ctx.warn((value ?? absentMeans) === true, `the OP did not refuse the request as unsupported, yet ${key} is ${JSON.stringify(value)} in its discovery document`);
}

export const unsignedRequestObjectModule: ConformanceModule = {
  name: 'oidcc-unsigned-request-object-supported-correctly-or-rejected-as-unsupported',
  summary: 'an unsigned request object by value: processed (state and nonce only inside it), or request_not_supported',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    skipUnlessNoneAllowed(ctx, session.provider);
    const request = authorizationRequest(session);
    const wire = requestObjectWire(request.params, request.params, { request: unsignedRequestObject(request.params) });
    const front = await authorize(ctx, session, request, { wire });
    if (answeredError(ctx, front) === 'request_not_supported') {
      ctx.notSupported('the OP answered request_not_supported: it does not support request objects, which OIDCC 3.1.2.6 permits');
    }
    warnUnlessAdvertised(ctx, session.provider, 'request_parameter_supported', false);
    await completeFlow(ctx, session, front);
  },
};

export const unsignedRequestUri: ConformanceModule = {
  name: 'oidcc-request-uri-unsigned-supported-correctly-or-rejected-as-unsupported',
  summary: 'an unsigned request object by reference (request_uri): processed, or request_uri_not_supported',
  async run(ctx: ModuleContext) {
    const requestUri = `${new URL(REDIRECT_URI).origin}/requesturi/${randomValue(64)}#${randomValue(43)}`;
    const session = await setUp(ctx, this.name, { registration: { request_uris: [requestUri] } });
    skipUnlessNoneAllowed(ctx, session.provider);
    const request = authorizationRequest(session);
    const wire = requestObjectWire(request.params, request.params, { request_uri: requestUri });
    const front = await authorize(ctx, session, request, { wire });
    const { landing } = front.journey;
    const error = answeredError(ctx, front);
    if (error === 'request_uri_not_supported') {
      ctx.notSupported('the OP answered request_uri_not_supported: it does not support request_uri, which is permitted');
    }
    if (landing.kind === 'page' || error !== undefined) {
      // The suite serves the request object at request_uri; this runner serves nothing, so an OP that
      // tried to fetch it could not, and what it answered says nothing about its support.
      ctx.notRun(`the OP did not answer request_uri_not_supported (it answered: ${pageSummary(landing)}); exercising request_uri needs the request object hosted where the OP can fetch it, which this runner does not do`);
    }
    warnUnlessAdvertised(ctx, session.provider, 'request_uri_parameter_supported', true);
    await completeFlow(ctx, session, front);
  },
};

export const requestObjectRedirectUri: ConformanceModule = {
  name: 'oidcc-ensure-request-object-with-redirect-uri',
  summary: 'the request object\'s redirect_uri is valid, the query\'s is not: the OP uses the object\'s, or shows an error page; never the query\'s, never request_not_supported at the registered URI',
  review: 'when the OP shows an error page the suite asks for a screenshot; this runner checks the OP did not redirect and its page names the redirect_uri or the request object',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    skipUnlessNoneAllowed(ctx, session.provider);
    const request = authorizationRequest(session);
    const invalidRedirectUri = `${session.client.redirectUri}_invalid`;
    const outer = { ...request.params, redirect_uri: invalidRedirectUri };
    const wire = requestObjectWire(outer, request.params, { request: unsignedRequestObject(request.params) });
    const front = await authorize(ctx, session, request, { wire });
    const { landing } = front.journey;
    if (landing.kind === 'page') {
      // An OP that does not process request objects answers with an error page rather than redirect to an unchecked URI.
      const problem = errorPageProblem(landing, /redirect|request/i, 'an error page (invalid redirect_uri)');
      ctx.check(problem === undefined, problem ?? '');
      ctx.note(`read instead of a screenshot: ${pageSummary(landing)}`);
      return;
    }
    ctx.require(landing.url.href.split('?')[0] !== invalidRedirectUri, `the OP redirected to the redirect_uri outside the request object (${invalidRedirectUri}), which is not registered`);
    ctx.require(callbackParams(landing).error !== 'request_not_supported', 'An invalid redirect_uri was included in the authorization request but the OP redirected to a default redirect_uri (with request_not_supported) instead of displaying an error page');
    await completeFlow(ctx, session, front);
  },
};
