import type { ModuleContext } from '../context.ts';
import type { Exchange } from '../http/exchange_log.ts';
import { jsonObject, type HttpResponse } from '../http/http_client.ts';
import type { Provider } from './provider.ts';
import type { Client } from './registration.ts';

export interface TokenEndpointResponse {
  response: HttpResponse;
  body: Record<string, unknown> | undefined;
  exchange: Exchange | undefined;
}

/**
 * AddBasicAuthClientSecretToRequest: client_id and secret each form-urlencoded (RFC 6749 2.3.1),
 * then joined and base64-encoded. URLSearchParams encodes as application/x-www-form-urlencoded.
 */
function basicCredentials(client: Client): string {
  const encode = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);
  return `Basic ${Buffer.from(`${encode(client.clientId)}:${encode(client.clientSecret ?? '')}`).toString('base64')}`;
}

/** CallTokenEndpointAndReturnFullResponse with the client's authentication added. */
export async function callTokenEndpoint(ctx: ModuleContext, provider: Provider, client: Client, form: Record<string, string>): Promise<TokenEndpointResponse> {
  const headers: Record<string, string> = {};
  const body = { ...form };
  if (client.authMethod === 'client_secret_basic') headers.authorization = basicCredentials(client);
  else Object.assign(body, { client_id: client.clientId, client_secret: client.clientSecret ?? '' });
  const response = await ctx.http.postForm(provider.metadata.token_endpoint!, body, headers);
  return { response, body: jsonObject(response), exchange: ctx.log.last() };
}

/** CreateTokenEndpointRequestForAuthorizationCodeGrant (plus the PKCE verifier when one was sent). */
export function authorizationCodeGrant(client: Client, code: string, codeVerifier?: string): Record<string, string> {
  return {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUri,
    ...(codeVerifier === undefined ? {} : { code_verifier: codeVerifier }),
  };
}
