import type Koa from 'koa';
import type { Middleware } from 'koa';

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

/** A request target in absolute form (RFC 9112 section 3.2.2): `GET https://host/path HTTP/1.1`. */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * A request whose target is in absolute form is answered as one in origin form: the path and
 * query alone, for the issuer, as a Host naming anything else is. Koa reads such a target as the
 * request's whole URL (`ctx.href`), so the engine would build discovery's URLs from an authority
 * the caller chose, and a DPoP proof made for another server's URL (its `htu`) would match here,
 * letting a server a token was sent to replay it with its proof (RFC 9449 section 4.3). Proxies
 * send origin form; only a caller speaking to the service directly sends this.
 */
export const originFormTargets: Middleware = async (ctx, next) => {
  if (ABSOLUTE_FORM.test(ctx.originalUrl)) {
    const target = URL.parse(ctx.originalUrl);
    // A scheme without a path of its own (`x://y`) parses to an empty one: the root, then.
    const originForm = target ? `${target.pathname || '/'}${target.search}` : '/';
    ctx.url = originForm;
    ctx.originalUrl = originForm;
    ctx.request.originalUrl = originForm;
  }
  await next();
};
