/** What can carry a response header: a Koa context or response. */
interface Headers {
  set(field: string, value: string): unknown;
}

/**
 * `Cache-Control: no-store`: for every answer that carries a credential, a secret, a page with a
 * form, or anything about one user (RFC 6749 5.1, RFC 6750 3, RFC 7662 2.2). The one place it is spelled.
 */
export function noStore(response: Headers): void {
  response.set('Cache-Control', 'no-store');
}
