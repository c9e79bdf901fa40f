/** What can carry a response header: a Koa context or response. */
interface Headers {
  set(field: string, value: string): unknown;
}

/**
 * `Cache-Control: no-store`: for every answer that carries a credential, a secret, a page with a
 * form, or anything about one user (RFC 6749 5.1, RFC 6750 3, RFC 7662 2.2), with `Pragma: no-cache`
 * for HTTP/1.0 caches, which RFC 6749 5.1 asks for beside it. The one place they are spelled.
 */
export function noStore(response: Headers): void {
  response.set('Cache-Control', 'no-store');
  response.set('Pragma', 'no-cache');
}

/** Whether an answer's `Cache-Control` (as the engine or a step set it) forbids storing it. */
export function isNoStore(cacheControl: string): boolean {
  return /(?:^|,)\s*no-store\s*(?:,|$)/i.test(cacheControl);
}
