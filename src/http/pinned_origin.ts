import type Koa from 'koa';

/**
 * Every URL the service emits (discovery, registration_client_uri, redirects to its own pages)
 * derives from BASE_URL alone. The engine builds its URLs from the request's protocol and host,
 * which the Host header (or X-Forwarded-Host and -Proto behind a proxy) would let any caller
 * choose: a cache in between would then hand everyone metadata pointing elsewhere. So every request
 * of the app is seen with the issuer's protocol and host, whatever it names, and answered as for
 * the issuer. Set once on the app's request prototype: no work per request. (A browser asking for
 * a page under another name is sent to the issuer's first: page_host.ts, which reads the raw headers.)
 *
 * With an https issuer every request therefore counts as secure: cookies are always `Secure` and
 * HSTS always sent, whether or not a proxy says the hop before it was https.
 */
export function pinOrigin(app: Koa, issuer: string): void {
  const { host, protocol } = new URL(issuer);
  Object.defineProperty(app.request, 'host', { value: host });
  Object.defineProperty(app.request, 'protocol', { value: protocol.slice(0, -1) });
}
