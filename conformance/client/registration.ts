import type { ModuleContext } from '../context.ts';
import { HTTPS_RULE, isHttpsOrLoopback } from '../checks/urls.ts';
import { jsonObject, mediaType, type HttpResponse } from '../http/http_client.ts';
import type { Provider } from './provider.ts';

export type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post';

/**
 * Where the OP is asked to send the browser back. The host is under .invalid (RFC 2606): it can
 * never resolve, so nothing is ever sent to it; the user agent stops at the OP's redirect.
 */
export const REDIRECT_URI = 'https://rp.conformance.invalid/callback';
const SUPPORT_EMAIL = 'certification@oidf.org';

export interface Client {
  clientId: string;
  clientSecret?: string;
  /** private_key_jwt: a FAPI 2.0 client (client/fapi2_client.ts), which authenticates with its own requests. */
  authMethod: ClientAuthMethod | 'private_key_jwt';
  /** The redirect URI the suite uses in authorization requests (the first registered). */
  redirectUri: string;
  request: Record<string, unknown>;
  registration: Record<string, unknown>;
}

/**
 * The suite's OIDCCCreateDynamicClientRegistrationRequest for response_type=code: client_name,
 * grant_types [authorization_code], the public jwks, token_endpoint_auth_method, response_types
 * [code], redirect_uris, contacts; then what a module adds.
 */
export function registrationRequest(ctx: ModuleContext, moduleName: string, authMethod: ClientAuthMethod, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    client_name: `OIDF Conformance Test ${moduleName}`,
    grant_types: ['authorization_code'],
    jwks: ctx.target.clientJwks,
    token_endpoint_auth_method: authMethod,
    response_types: ['code'],
    redirect_uris: [REDIRECT_URI],
    contacts: [SUPPORT_EMAIL],
    ...extra,
  };
}

/** The suite's CallDynamicRegistrationEndpoint: POST the request, whatever the answer. */
export async function postRegistration(ctx: ModuleContext, provider: Provider, request: Record<string, unknown>): Promise<HttpResponse> {
  const endpoint = provider.metadata.registration_endpoint;
  ctx.require(typeof endpoint === 'string' && endpoint !== '', "Couldn't find registration endpoint (registration_endpoint in the discovery document); the suite registers its clients dynamically");
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (ctx.target.initialAccessToken) headers.authorization = `Bearer ${ctx.target.initialAccessToken}`;
  return ctx.http.send({ method: 'POST', url: endpoint, headers, body: JSON.stringify(request) });
}

/** CallDynamicRegistrationEndpointAndVerifySuccessfulResponse. */
export async function register(ctx: ModuleContext, provider: Provider, request: Record<string, unknown>): Promise<Client> {
  const response = await postRegistration(ctx, provider, request);
  const exchange = ctx.log.last();
  ctx.check(mediaType(response) === 'application/json', `the registration response's Content-Type is ${response.headers.get('content-type')}, expected application/json (OIDCR-3.2)`);
  ctx.check(response.status === 201, `the registration endpoint answered ${response.status}, expected 201 (OIDCR-3.2)`);
  const body = jsonObject(response);
  ctx.check(typeof body?.error !== 'string', `the registration endpoint returned an error: ${String(body?.error)} ${String(body?.error_description ?? '')}`.trim());
  ctx.require(body !== undefined && typeof body.client_id === 'string', 'no client_id in the dynamic registration response', exchange);
  checkManagementCredentials(ctx, body);
  if (typeof body.client_secret === 'string') {
    ctx.check(typeof body.client_secret_expires_at === 'number', 'Missing client_secret_expires_at for token_endpoint_auth_method in client registration response (OIDCR-3.2)');
  }
  const redirectUris = request.redirect_uris as string[];
  return {
    clientId: body.client_id,
    clientSecret: typeof body.client_secret === 'string' ? body.client_secret : undefined,
    authMethod: request.token_endpoint_auth_method as ClientAuthMethod,
    redirectUri: redirectUris[0]!,
    request,
    registration: body,
  };
}

/** VerifyClientManagementCredentials (RFC 7592): both or neither, the URI https. */
function checkManagementCredentials(ctx: ModuleContext, body: Record<string, unknown>): void {
  const uri = body.registration_client_uri;
  const token = body.registration_access_token;
  if (uri === undefined && token === undefined) return;
  ctx.check(uri !== undefined, 'Dynamic registration returned registration_access_token but not registration_client_uri');
  ctx.check(token !== undefined, 'Dynamic registration returned registration_client_uri but not registration_access_token');
  if (typeof uri === 'string') ctx.check(isHttpsOrLoopback(uri), `registration_client_uri ${uri} does not use ${HTTPS_RULE}`);
  if (token !== undefined) ctx.check(typeof token === 'string' && token !== '', 'registration_access_token must not be an empty string');
}

/** The suite's cleanup (UnregisterDynamicallyRegisteredClient): graded as a warning only. */
export async function unregister(ctx: ModuleContext, client: Client): Promise<void> {
  const uri = client.registration.registration_client_uri;
  const token = client.registration.registration_access_token;
  if (typeof uri !== 'string' || typeof token !== 'string') return;
  try {
    const response = await ctx.http.send({ method: 'DELETE', url: uri, headers: { accept: 'application/json', authorization: `Bearer ${token}` } });
    ctx.warn(response.status === 204, `registration_client_uri returned a http status code other than 204 No Content (${response.status}) when the client was unregistered`);
  } catch (error) {
    ctx.warn(false, `unregistering the client failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
