import type { Context, Middleware } from 'koa';

// DPoP: a browser client sends its proof and reads the nonce it is asked to use (RFC 9449 sections 4.1 and 9).
// Idempotency-Key: a browser client may retry a create safely, and tell a replayed answer.
const ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'DPoP', 'Idempotency-Key', 'If-Match', 'If-None-Match'];
const EXPOSED_HEADERS = ['WWW-Authenticate', 'Location', 'DPoP-Nonce', 'Idempotent-Replayed'];
/** Preflight answers kept by browsers this long (seconds). */
const PREFLIGHT_MAX_AGE = 600;

/**
 * CORS for resources called with a bearer credential: any origin may call, since no cookie is
 * ever involved (credentials are not allowed, so `*` is safe), and a browser client may read the
 * challenge in `WWW-Authenticate` to find the authorization server. A protocol with headers of
 * its own (MCP's) names them in `headers`: allowed on requests and readable on responses. An
 * OPTIONS request is answered with the `methods` of its path, for a browser's preflight and in
 * `Allow` (RFC 9110 section 9.3.7) for anyone else.
 */
export function bearerCors(methods: string | ((ctx: Context) => string), headers: readonly string[] = []): Middleware {
  const allowed = [...ALLOWED_HEADERS, ...headers].join(', ');
  const exposed = [...EXPOSED_HEADERS, ...headers].join(', ');
  const methodsOf = typeof methods === 'string' ? () => methods : methods;
  return async (ctx, next) => {
    ctx.set('Access-Control-Allow-Origin', '*');
    ctx.set('Access-Control-Expose-Headers', exposed);
    if (ctx.method === 'OPTIONS') {
      const taken = methodsOf(ctx);
      ctx.set('Allow', `${taken}, OPTIONS`);
      ctx.set('Access-Control-Allow-Methods', taken);
      ctx.set('Access-Control-Allow-Headers', allowed);
      ctx.set('Access-Control-Max-Age', String(PREFLIGHT_MAX_AGE));
      ctx.status = 204;
      return;
    }
    await next();
  };
}
