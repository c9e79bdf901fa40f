import type { ModuleContext } from '../context.ts';
import { authorizationRequest, randomValue } from '../client/authorization_request.ts';
import { postRegistration, REDIRECT_URI, registrationRequest } from '../client/registration.ts';
import { discover } from '../client/provider.ts';
import { errorPageProblem, pageSummary } from '../checks/error_page.ts';
import { authorize, happyFlow, setUp, type SetUpOptions } from '../flows/code_flow.ts';
import { jsonObject, mediaType } from '../http/http_client.ts';
import type { ConformanceModule } from '../module.ts';

const REDIRECT_URI_TOPIC = /redirect|return address|callback/i;
const ERROR_PAGE_REVIEW = 'the suite asks for a screenshot of the OP\'s error page; this runner checks the OP did not redirect and its page names the redirect_uri';

/**
 * The modules that expect the OP to refuse a redirect_uri on a page of its own: any redirect
 * (to the registered URI or the requested one) fails; so does a page that is not an error about it.
 */
function errorPageTest(name: string, summary: string, setUpOptions: SetUpOptions, change: (params: Record<string, string>) => void): ConformanceModule {
  return {
    name,
    summary,
    review: ERROR_PAGE_REVIEW,
    async run(ctx: ModuleContext) {
      const session = await setUp(ctx, name, setUpOptions);
      const request = authorizationRequest(session);
      change(request.params);
      const front = await authorize(ctx, session, request, { stopAtLogin: true });
      const problem = errorPageProblem(front.journey.landing, REDIRECT_URI_TOPIC, 'an error page saying the redirect_uri is invalid');
      ctx.check(problem === undefined, problem ?? '');
      ctx.note(`read instead of a screenshot: ${pageSummary(front.journey.landing)}`);
    },
  };
}

export const registeredRedirectUri = errorPageTest(
  'oidcc-ensure-registered-redirect-uri',
  'an unregistered redirect_uri (the registered one plus a random path) must get an error page, never a redirect',
  {},
  (params) => { params.redirect_uri = `${REDIRECT_URI}/${randomValue(10)}`; },
);

export const redirectUriInRequest = errorPageTest(
  'oidcc-ensure-redirect-uri-in-authorization-request',
  'two redirect URIs registered and none in the request: an error page, never a redirect',
  { registration: { redirect_uris: [REDIRECT_URI, 'https://example.org/redirect'] } },
  (params) => { delete params.redirect_uri; },
);

const WITH_QUERY = `${REDIRECT_URI}?bar=foo`;

export const redirectUriQueryMismatch = errorPageTest(
  'oidcc-redirect-uri-query-mismatch',
  'registered ?bar=foo, requested ?foo=bar: an error page, never a redirect',
  { registration: { redirect_uris: [WITH_QUERY] } },
  (params) => { params.redirect_uri = `${REDIRECT_URI}?foo=bar`; },
);

export const redirectUriQueryAdded = errorPageTest(
  'oidcc-redirect-uri-query-added',
  'registered without a query, requested with ?foo=bar: an error page, never a redirect',
  {},
  (params) => { params.redirect_uri = `${REDIRECT_URI}?foo=bar`; },
);

export const redirectUriQueryOk: ConformanceModule = {
  name: 'oidcc-redirect-uri-query-OK',
  summary: 'a redirect_uri registered and requested with ?bar=foo: the flow succeeds and bar=foo comes back',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name, { registration: { redirect_uris: [WITH_QUERY] } });
    await happyFlow(ctx, session);
  },
};

export const redirectUriRegFrag: ConformanceModule = {
  name: 'oidcc-redirect-uri-regfrag',
  summary: 'registering a redirect_uri with a fragment must be refused: 400, invalid_redirect_uri or invalid_client_metadata (another code a warning)',
  async run(ctx: ModuleContext) {
    await refuseRegistration(ctx, this.name, { redirect_uris: [`${REDIRECT_URI}#foobar`] });
  },
};

/** OIDCCRedirectUriRegFrag.configureDynamicClient. */
async function refuseRegistration(ctx: ModuleContext, name: string, extra: Record<string, unknown>): Promise<void> {
  const provider = await discover(ctx);
  const response = await postRegistration(ctx, provider, registrationRequest(ctx, name, 'client_secret_basic', extra));
  ctx.check(mediaType(response) === 'application/json', `the registration endpoint's answer has Content-Type ${response.headers.get('content-type')}, expected application/json`);
  ctx.check(response.status === 400, `the registration endpoint answered ${response.status}, expected 400 (RFC6749-3.1.2)`);
  const error = jsonObject(response)?.error;
  ctx.warn(error === 'invalid_redirect_uri' || error === 'invalid_client_metadata', `the registration error is ${JSON.stringify(error)}, expected invalid_redirect_uri or invalid_client_metadata (OIDCR-3.3)`);
}
