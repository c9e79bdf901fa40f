import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import compose from 'koa-compose';

import { HttpError, unreadableBodyStatus } from '../shared/http_error.ts';
import { noStore } from '../shared/no_store.ts';
import { answerErrorsAs } from './errors.ts';

/** Enough for any authorization request; the redirect carries it in a URL, which Node caps at 16 KiB of headers. */
const FORM_LIMIT = 8 * 1024;

/** The longest URL the 303 may name: Node reads request heads of up to 16 KiB, cookies included. */
const REDIRECT_URL_LIMIT = 12 * 1024;

/**
 * A POST with a form body answered with 303 to the same request as GET, for an endpoint the
 * engine serves by GET: the authorization endpoint (OpenID Connect Core 3.1.2.1) and the logout
 * endpoint (RP-Initiated Logout 1.0 section 2). `requestName` ("logout request") names it on the
 * error page.
 *
 * The engine serves POST itself only with `cookies.long.sameSite = 'none'` (a cross-site form
 * post carries no Lax cookie), which needs Secure cookies and so breaks http development. The
 * same request is answered instead with 303 to the GET form of itself: the browser follows it as
 * a top-level GET navigation, which does carry the Lax session cookie, and the engine handles it
 * exactly as any GET (same validation, same errors, same session). Only the body counts, as for
 * the engine's own POST handling. A browser sent this, so a refusal is a page.
 */
export function formPostAsGet(endpointUrl: string, requestName: string): Middleware {
  const parseForm = bodyParser({ enableTypes: ['form'], formLimit: FORM_LIMIT }) as Middleware;
  return compose([answerErrorsAs('page'), refuseWhatIsNotAForm(requestName), parseForm, async (ctx) => {
    const url = `${endpointUrl}?${new URLSearchParams(ctx.request.rawBody ?? '')}`;
    // Re-encoded, raw bytes a browser did not escape grow threefold: a URL the service would then
    // refuse to read (431) is refused here, where the page can say why.
    if (url.length > REDIRECT_URL_LIMIT) {
      throw new HttpError(413, 'invalid_request', `the ${requestName} is too large to be carried in a link (over ${REDIRECT_URL_LIMIT / 1024} KiB once encoded)`);
    }
    ctx.status = 303;
    noStore(ctx);
    ctx.redirect(url);
  }]);
}

function refuseWhatIsNotAForm(requestName: string): Middleware {
  return async (ctx, next) => {
    if (!ctx.is('application/x-www-form-urlencoded')) {
      throw new HttpError(400, 'invalid_request', `the ${requestName} sent with POST must be a form (application/x-www-form-urlencoded)`);
    }
    if ((ctx.request.length ?? 0) > FORM_LIMIT) {
      throw new HttpError(413, 'invalid_request', `the ${requestName} is larger than ${FORM_LIMIT / 1024} KiB`);
    }
    try {
      await next();
    } catch (error) {
      // A body that outgrows its declared length (chunked) or cannot be decoded.
      const status = error instanceof HttpError ? undefined : unreadableBodyStatus(error);
      if (status === undefined) throw error;
      throw new HttpError(status, 'invalid_request', `the ${requestName} body could not be read`);
    }
  };
}
