import type { ModuleContext } from '../context.ts';
import type { TokenEndpointResponse } from '../client/token_endpoint.ts';
import { mediaType } from '../http/http_client.ts';

const ERROR_CODE = /^[\x20-\x21\x23-\x5b\x5d-\x7e]+$/;
const ERROR_DESCRIPTION = /^[\x09\x0a\x0d\x20-\x21\x23-\x5b\x5d-\x7e]+$/;
const ERROR_URI = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/**
 * AbstractOIDCCAuthCodeReuse.checkResponse / RefreshTokenRequestExpectingErrorSteps: 400, JSON,
 * invalid_grant, and the error fields within RFC 6749 5.2's character sets.
 */
export function checkInvalidGrant(ctx: ModuleContext, token: TokenEndpointResponse): void {
  const { response, body, exchange } = token;
  ctx.check(response.status === 400, `the token endpoint answered ${response.status}, expected 400 (OIDCC-3.1.3.4)`, exchange);
  ctx.check(mediaType(response) === 'application/json', `the token endpoint's error has Content-Type ${response.headers.get('content-type')}, expected application/json (OIDCC-3.1.3.4)`, exchange);
  const error = body?.error;
  ctx.check(error === 'invalid_grant', `'error' is ${JSON.stringify(error)}, expected invalid_grant (RFC6749-5.2)`, exchange);
  ctx.check(typeof error === 'string' && ERROR_CODE.test(error), `'error' is missing or has characters RFC 6749 5.2 does not allow: ${JSON.stringify(error)}`, exchange);
  const description = body?.error_description;
  if (typeof description === 'string' && description !== '') {
    ctx.warn(!/[\r\n\t]/.test(description), "the token endpoint's 'error_description' contains CR, LF or TAB");
    ctx.check(ERROR_DESCRIPTION.test(description), `'error_description' has characters RFC 6749 5.2 does not allow: ${JSON.stringify(description)}`, exchange);
  }
  const uri = body?.error_uri;
  if (typeof uri === 'string' && uri !== '') ctx.check(ERROR_URI.test(uri) && URL.canParse(uri), `'error_uri' is not a valid URI within RFC 6749 5.2's character set: ${uri}`, exchange);
}
