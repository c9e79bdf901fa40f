/** What can answer a request header: a Koa context or request. */
interface RequestHeaders {
  get(field: string): string;
}

/**
 * The name the client asked for, as its `Host` header says it, or behind a trusted proxy
 * (TRUST_PROXY) the proxy's first `X-Forwarded-Host` when it sends one: the `Host` then names
 * the proxy's upstream address, which says nothing of what the client asked for. Empty when
 * neither names one.
 */
export function requestedHost(request: RequestHeaders, trustProxy: boolean): string {
  const forwarded = trustProxy ? request.get('X-Forwarded-Host').split(',')[0]!.trim() : '';
  return forwarded || request.get('Host');
}
