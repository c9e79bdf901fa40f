import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import compose from 'koa-compose';

import { HttpError, unreadableBodyStatus } from '../shared/http_error.ts';
import { noStore } from '../shared/no_store.ts';
import { answerErrorsAs } from './errors.ts';
import { POSTED_FORM_SECONDS, type PostedForms } from './posted_forms.ts';

/** Enough for any authorization request (a signed request object included). */
const FORM_LIMIT = 8 * 1024;

/**
 * The longest form once encoded as a query: what the same request could carry by GET (Node reads
 * request heads of up to 16 KiB, cookies included), so a POST takes no more than a GET would, and
 * neither the form kept nor the interaction it leads to grows past that.
 */
const QUERY_LIMIT = 12 * 1024;

/** The one query parameter of the GET that follows the 303: the posted form's handle. */
export const POSTED_FORM_PARAMETER = 'posted_form';

/** Where a posted form is kept, and the limit on how many one address may have kept. */
export interface PostedFormSteps {
  forms: PostedForms;
  limit: Middleware;
}

/**
 * A POST with a form body answered with 303 to the same endpoint by GET, for an endpoint the
 * engine serves by GET: the authorization endpoint (OpenID Connect Core 3.1.2.1) and the logout
 * endpoint (RP-Initiated Logout 1.0 section 2). `requestName` ("logout request") names it on the
 * error page.
 *
 * The engine serves POST itself only with `cookies.long.sameSite = 'none'` (a cross-site form
 * post carries no Lax cookie), which needs Secure cookies and so breaks http development. The
 * browser is sent instead to a GET, a top-level navigation, which does carry the Lax session
 * cookie. That GET names only a handle to the form, parked in the store (src/http/posted_forms.ts):
 * a client posts to keep its parameters (a logout's `id_token_hint`) out of URLs, the browser's
 * history and the logs of whatever sits in between, and this keeps them out. On that GET,
 * restorePostedForm puts the form back as the request's query, and the engine handles it exactly
 * as any GET (same validation, same errors, same session). Only the body counts, as for the
 * engine's own POST handling. Each form kept counts against its address's allowance (`limit`). A
 * browser sent this, so a refusal is a page.
 */
export function formPostAsGet(posted: PostedFormSteps, endpointUrl: string, requestName: string): Middleware {
  const { forms, limit } = posted;
  const parseForm = bodyParser({ enableTypes: ['form'], formLimit: FORM_LIMIT }) as Middleware;
  return compose([answerErrorsAs('page'), readForm(requestName, parseForm), limit, async (ctx) => {
    const query = new URLSearchParams(ctx.request.rawBody ?? '').toString();
    // Raw bytes a browser did not escape grow threefold or more once encoded.
    if (query.length > QUERY_LIMIT) {
      throw new HttpError(413, 'invalid_request', `the ${requestName} is too large to be carried in a link (over ${QUERY_LIMIT / 1024} KiB once encoded)`);
    }
    const handle = await forms.park(ctx.path, query);
    ctx.status = 303;
    noStore(ctx);
    ctx.redirect(`${endpointUrl}?${POSTED_FORM_PARAMETER}=${handle}`);
  }]);
}

/**
 * On the GET formPostAsGet sent the browser to (its query is the handle alone), the posted form
 * becomes the request's query, before the engine reads it. A handle already used, expired, unknown
 * or parked at another endpoint gets the error page: the form is not there to send anywhere, and
 * the application that posted it can start again. A GET that could not be answered (an outage)
 * gives the form back, so the browser's reload is served. Every other request passes untouched, a
 * HEAD too: it takes no form, which only the browser's GET is for.
 */
export function restorePostedForm(forms: PostedForms, requestName: string): Middleware {
  const prefix = `${POSTED_FORM_PARAMETER}=`;
  return async (ctx, next) => {
    const query = ctx.querystring;
    if (ctx.method !== 'GET' || !query.startsWith(prefix) || query.includes('&')) return next();
    const taken = await forms.take(query.slice(prefix.length), ctx.path);
    if (taken === undefined) {
      ctx.state.errorFormat = 'page';
      throw new HttpError(400, 'invalid_request', `this ${requestName} was sent more than ${POSTED_FORM_SECONDS} seconds ago or has been used already: go back to the application and start again`);
    }
    ctx.querystring = taken.form;
    try {
      await next();
    } catch (error) {
      await (answered(error) ? taken.done() : taken.giveBack());
      throw error;
    }
    await (ctx.status < 500 ? taken.done() : taken.giveBack());
  };
}

/** A refusal thrown below was an answer to the request (a 4xx); anything else is a failure to answer it. */
function answered(error: unknown): boolean {
  return error instanceof HttpError && error.status < 500;
}

/** The form, read after the checks a refusal can name; only the body's own faults are answered as unreadable. */
function readForm(requestName: string, parseForm: Middleware): Middleware {
  return async (ctx, next) => {
    if (!ctx.is('application/x-www-form-urlencoded')) {
      throw new HttpError(400, 'invalid_request', `the ${requestName} sent with POST must be a form (application/x-www-form-urlencoded)`);
    }
    if ((ctx.request.length ?? 0) > FORM_LIMIT) {
      throw new HttpError(413, 'invalid_request', `the ${requestName} is larger than ${FORM_LIMIT / 1024} KiB`);
    }
    try {
      await parseForm(ctx, async () => undefined);
    } catch (error) {
      // A body that outgrows its declared length (chunked) or cannot be decoded.
      const status = unreadableBodyStatus(error);
      if (status === undefined) throw error;
      throw new HttpError(status, 'invalid_request', `the ${requestName} body could not be read`);
    }
    await next();
  };
}
