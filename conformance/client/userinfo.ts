import type { ModuleContext } from '../context.ts';
import type { HttpResponse } from '../http/http_client.ts';
import type { Provider } from './provider.ts';

export interface AccessToken {
  value: string;
  /** token_type from the token response: the Authorization scheme (Bearer). */
  type: string;
}

/** How the access token goes to the userinfo endpoint: OIDCCUserInfoGet, -PostHeader, -PostBody. */
export type UserinfoMethod = 'get' | 'post-header' | 'post-body';

/**
 * CallUserInfoEndpoint (GET, or POST with an empty form body, the token in the Authorization
 * header as `token_type value`) and CallUserInfoEndpointWithBearerTokenInBody (POST,
 * access_token in the form body, no header).
 */
export async function callUserinfo(ctx: ModuleContext, provider: Provider, token: AccessToken, method: UserinfoMethod = 'get'): Promise<HttpResponse> {
  const url = provider.metadata.userinfo_endpoint;
  ctx.require(typeof url === 'string' && url !== '', 'userinfo_endpoint missing from server configuration (not mandatory in OpenID Connect, but mandatory for certification)');
  ctx.require(/^(bearer|dpop)$/i.test(token.type), `Access token is neither a bearer nor a dpop token (token_type ${token.type})`);
  const accept = 'application/json, application/jwt';
  if (method === 'post-body') return ctx.http.postForm(url, { access_token: token.value }, { accept });
  const headers = { accept, authorization: `${token.type} ${token.value}` };
  if (method === 'get') return ctx.http.send({ method: 'GET', url, headers });
  return ctx.http.send({ method: 'POST', url, headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
}
