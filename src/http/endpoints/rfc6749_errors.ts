import type { Context, Middleware } from 'koa';

import { whyDocumentNotFetched } from '../../clients/metadata_documents.ts';
import { oidcOf } from '../../engine/context.ts';

interface ErrorBody {
  error?: string;
  error_description?: string;
}

/** The protection space every client authentication challenge names, the engine's included. */
const CLIENT_REALM = 'oauth';

/** The challenge of a 401 from an endpoint that authenticates clients: HTTP requires one. */
const CLIENT_CHALLENGE = `Basic realm="${CLIENT_REALM}"`;

/** The engine's words for an Authorization header that is not HTTP Basic with a client_id and secret. */
const UNREADABLE_AUTHORIZATION = new Set([
  'invalid authorization header value format',
  'client_id and client_secret in the authorization header are not properly encoded',
]);

/**
 * Where the engine's error differs from RFC 6749 section 5.2, the host corrects it on the
 * endpoints that authenticate clients (token, introspection, revocation, pushed authorization requests):
 * - no client authentication at all is `invalid_client` (401), not `invalid_request`; but a body
 *   the engine did not read, sent without a content type, is said to be the problem;
 * - a grant type the client is not registered for is `unauthorized_client`, not `invalid_request`;
 * - a client_id whose metadata document cannot be used names a client that cannot be
 *   authenticated: `invalid_client`, not the registration error codes the engine reports it with
 *   (`invalid_client_metadata`, `invalid_redirect_uri`: RFC 7591 section 3.2.2 only);
 * - HTTP Basic with an empty password, an Authorization header that is not Basic, or whose
 *   credentials do not decode, is a client authentication that failed in the Authorization
 *   header: `invalid_client` (section 5.2: an unsupported method is too), not `invalid_request`;
 * - `invalid_client` is always 401 with a challenge, as HTTP requires of a 401 (a metadata
 *   document that could not be used is 400 from the engine, and a failed client_secret_post has
 *   no challenge), so a client sees one status for one error, and every challenge names one
 *   realm (the engine's names the issuer), one protection space (RFC 9110 section 11.5);
 * - a metadata document the engine could not fetch or read is said why, as the engine keeps it
 *   to itself ("fetch failed"): whoever sent the client_id chose the URL.
 */
export const rfc6749ErrorCodes: Middleware = async (ctx, next) => {
  await next();
  const body = ctx.body as ErrorBody | undefined;
  const notFetched = whyDocumentNotFetched(ctx.state.engineRefusal);
  if (body && notFetched) body.error_description = `${body.error_description}: ${notFetched}`;
  if (ctx.status === 400 && body && isClientAuthenticationFailure(body)) {
    body.error = 'invalid_client';
    if (UNREADABLE_AUTHORIZATION.has(body.error_description ?? '')) body.error_description = UNREADABLE_AUTHORIZATION_DESCRIPTION;
  }
  if (body?.error === 'invalid_client' && (ctx.status === 400 || ctx.status === 401)) {
    ctx.status = 401;
    const challenge = ctx.response.get('WWW-Authenticate');
    ctx.set('WWW-Authenticate', challenge ? inClientRealm(ctx, challenge) : CLIENT_CHALLENGE);
    return;
  }
  if (ctx.status !== 400 || body?.error !== 'invalid_request') return;
  const oidc = oidcOf(ctx);
  if (!oidc?.client && body.error_description === 'no client authentication mechanism provided') {
    if (hasUntypedBody(ctx)) body.error_description = 'send the parameters as application/x-www-form-urlencoded: a body without a Content-Type is not read';
    else answerMissingClientAuthentication(ctx, body);
    return;
  }
  const grantType = oidc?.params?.grant_type;
  if (oidc?.client && typeof grantType === 'string' && !oidc.client.grantTypeAllowed(grantType)) {
    body.error = 'unauthorized_client';
    body.error_description = grantType === 'client_credentials'
      ? 'this client is not registered for client_credentials; only clients bound to a workspace (registered with a workspace admin\'s initial access token) may use it'
      : `this client is not registered for the ${grantType} grant type`;
  }
};

/** An engine refusal that is a client failing to authenticate, whatever code the engine gives it. */
function isClientAuthenticationFailure(body: ErrorBody): boolean {
  if (body.error === 'invalid_client_metadata' || body.error === 'invalid_redirect_uri') return true;
  if (body.error !== 'invalid_request') return false;
  return body.error_description === 'client_secret must be provided in the Authorization header' || UNREADABLE_AUTHORIZATION.has(body.error_description ?? '');
}

const UNREADABLE_AUTHORIZATION_DESCRIPTION = 'the Authorization header must be HTTP Basic with the client_id and client_secret, each form-encoded (RFC 6749 section 2.3.1)';

/** The engine's Basic challenge (with its error and description) under the realm of every other. */
function inClientRealm(ctx: Context, challenge: string): string {
  const issuer = oidcOf(ctx)?.provider.issuer;
  return issuer ? challenge.replace(`realm="${issuer}"`, `realm="${CLIENT_REALM}"`) : challenge;
}

/** A request body the engine ignored, having no Content-Type to tell it what the body is. */
function hasUntypedBody(ctx: Context): boolean {
  const declared = ctx.request.length;
  const chunked = ctx.get('transfer-encoding') !== '';
  return ctx.get('content-type') === '' && ((declared !== undefined && declared > 0) || chunked);
}

function answerMissingClientAuthentication(ctx: Context, body: ErrorBody): void {
  ctx.status = 401;
  ctx.set('WWW-Authenticate', CLIENT_CHALLENGE);
  body.error = 'invalid_client';
  // Every method a client may have, private_key_jwt's included: with FAPI=on it is the only one.
  body.error_description = 'client authentication is required: send client_id with its client_secret (client_secret_post or client_secret_basic) '
    + 'or with a client_assertion signed with its key (private_key_jwt), or client_id alone for a public client';
}
