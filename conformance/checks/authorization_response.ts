import type { ModuleContext } from '../context.ts';
import type { AuthorizationRequest } from '../client/authorization_request.ts';
import type { Provider } from '../client/provider.ts';
import type { Landing } from '../http/user_agent.ts';

/** The parameters the OP sent the client: the form it posted (response_mode=form_post), or the redirect's query. */
export function callbackParams(landing: Extract<Landing, { kind: 'redirect' }>): Record<string, string> {
  return landing.posted ?? Object.fromEntries(landing.url.searchParams);
}

/** CheckStateInAuthorizationResponse. */
export function checkState(ctx: ModuleContext, params: Record<string, string>, request: AuthorizationRequest): void {
  if (request.state === undefined) {
    ctx.check(!params.state, 'No state value was sent, but a state in response was returned');
    return;
  }
  const exempt = !params.state && (params.error === 'invalid_request_object' || params.error === 'invalid_request_uri');
  if (exempt) return;
  ctx.check(params.state !== undefined, `State was passed in request, but is missing from response (sent ${request.state})`);
  ctx.check(params.state === undefined || params.state === request.state, `State in response did not match: sent ${request.state}, got ${params.state}`);
}

/** ValidateIssIfPresentInAuthorizationResponse (RFC 9207). */
export function checkIss(ctx: ModuleContext, params: Record<string, string>, provider: Provider): void {
  if (params.iss === undefined) return;
  ctx.check(params.iss === provider.metadata.issuer, `'iss' parameter in authorization response (${params.iss}) does not match server's issuer value (${provider.metadata.issuer}) (OAuth2-iss-2)`);
}

/** CheckMatchingCallbackParameters: the query of the registered redirect_uri comes back. */
export function checkRedirectQueryKept(ctx: ModuleContext, callback: URL, redirectUri: string): void {
  for (const [name, value] of new URL(redirectUri).searchParams) {
    ctx.check(callback.searchParams.get(name) === value, `the redirect_uri's query parameter ${name}=${value} is not in the redirect back (got ${callback.searchParams.get(name)})`);
  }
}

const ERROR_DESCRIPTION = /^[\x09\x0a\x0d\x20-\x21\x23-\x5b\x5d-\x7e]+$/;
const ERROR_URI = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
const ERROR_RESPONSE_PARAMETERS = ['error', 'error_description', 'error_uri', 'state', 'session_state', 'iss'];

/**
 * performGenericAuthorizationEndpointErrorResponseValidation: state, iss, an error present, no
 * code, only the parameters an error response has (a warning), error_description and error_uri
 * within their character sets.
 */
export function checkErrorResponse(ctx: ModuleContext, params: Record<string, string>, request: AuthorizationRequest, provider: Provider): void {
  checkState(ctx, params, request);
  checkIss(ctx, params, provider);
  ctx.check(params.error !== undefined, 'Authorization server was expected to return an error but did not (OIDCC-3.1.2.6)');
  ctx.check(params.code === undefined, 'Authorization code is present in URL query but an error was expected (OIDCC-3.1.2.6)');
  const unexpected = Object.keys(params).filter((name) => !ERROR_RESPONSE_PARAMETERS.includes(name));
  ctx.warn(unexpected.length === 0, `error response includes unexpected parameters: ${unexpected.join(', ')}`);
  const description = params.error_description;
  if (description) {
    ctx.warn(!/[\r\n\t]/.test(description), "'error_description' contains CR, LF or TAB");
    ctx.check(ERROR_DESCRIPTION.test(description), `'error_description' includes characters outside the set RFC 6749 4.1.2.1 allows: ${JSON.stringify(description)}`);
  }
  if (params.error_uri) ctx.check(ERROR_URI.test(params.error_uri) && URL.canParse(params.error_uri), `'error_uri' is not a valid URI-reference within RFC 6749's character set: ${params.error_uri}`);
}

/** Checks an error code is one of those the module accepts. */
export function checkErrorCode(ctx: ModuleContext, params: Record<string, string>, accepted: string[], spec: string): void {
  ctx.check(params.error !== undefined && accepted.includes(params.error), `'error' is ${JSON.stringify(params.error)}, expected ${accepted.join(' or ')} (${spec})`);
}
