import { bodyParser } from '@koa/bodyparser';
import type { Context, Middleware } from 'koa';
import compose from 'koa-compose';

/** Enough for any authorization request; the redirect carries it in a URL, which Node caps at 16 KiB of headers. */
const AUTHORIZATION_FORM_LIMIT = 8 * 1024;

/** The longest URL the 303 may name: Node reads request heads of up to 16 KiB, cookies included. */
const REDIRECT_URL_LIMIT = 12 * 1024;

export type ShowError = (ctx: Context, error: string, description: string) => Promise<void>;

/**
 * OpenID Connect Core 3.1.2.1: the authorization endpoint MUST accept POST with a form body.
 *
 * The engine serves POST itself only with `cookies.long.sameSite = 'none'` (a cross-site form
 * post carries no Lax cookie), which needs Secure cookies and so breaks http development. The
 * same request is answered instead with 303 to the GET form of itself: the browser follows it as
 * a top-level GET navigation, which does carry the Lax session cookie, and the engine handles it
 * exactly as any GET (same validation, same errors, same session). Only the body counts, as for
 * the engine's own POST handling.
 */
export function authorizationByPost(authorizationUrl: string, showError: ShowError): Middleware {
  return formPostAsGet(authorizationUrl, showError, 'authorization request');
}

/**
 * The same for any endpoint the engine serves by GET only, e.g. the logout endpoint
 * (RP-Initiated Logout 1.0 section 2: GET and POST): `requestName` ("logout request") names it on the error page.
 */
export function formPostAsGet(endpointUrl: string, showError: ShowError, requestName: string): Middleware {
  const parseForm = bodyParser({ enableTypes: ['form'], formLimit: AUTHORIZATION_FORM_LIMIT }) as Middleware;
  return compose([refuseWhatIsNotAForm(showError, requestName), parseForm, async (ctx) => {
    const url = `${endpointUrl}?${new URLSearchParams(ctx.request.rawBody ?? '')}`;
    // Re-encoded, raw bytes a browser did not escape grow threefold: a URL the service would then
    // refuse to read (431) is refused here, where the page can say why.
    if (url.length > REDIRECT_URL_LIMIT) {
      ctx.status = 413;
      return showError(ctx, 'invalid_request', `the ${requestName} is too large to be carried in a link (over ${REDIRECT_URL_LIMIT / 1024} KiB once encoded)`);
    }
    ctx.status = 303;
    ctx.set('Cache-Control', 'no-store');
    ctx.redirect(url);
  }]);
}

function refuseWhatIsNotAForm(showError: ShowError, requestName: string): Middleware {
  return async (ctx, next) => {
    if (!ctx.is('application/x-www-form-urlencoded')) {
      ctx.status = 400;
      return showError(ctx, 'invalid_request', `the ${requestName} sent with POST must be a form (application/x-www-form-urlencoded)`);
    }
    if ((ctx.request.length ?? 0) > AUTHORIZATION_FORM_LIMIT) {
      ctx.status = 413;
      return showError(ctx, 'invalid_request', `the ${requestName} is larger than ${AUTHORIZATION_FORM_LIMIT / 1024} KiB`);
    }
    try {
      await next();
    } catch (error) {
      // A body that outgrows its declared length (chunked) or cannot be decoded.
      const status = (error as { status?: unknown }).status;
      if (typeof status !== 'number' || status >= 500) throw error;
      ctx.status = status;
      await showError(ctx, 'invalid_request', `the ${requestName} body could not be read`);
    }
  };
}
