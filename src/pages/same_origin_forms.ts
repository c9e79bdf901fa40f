import type { Middleware } from 'koa';

import { HttpError } from '../shared/http_error.ts';

/** The methods that change nothing (RFC 9110 section 9.2.1): never refused here. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/**
 * The product's own forms (sign-in, consent, the sign-out question, the settings area) are only
 * ever sent from the service's own pages, so one sent from elsewhere is refused before anything
 * reads it: 403 and the error page saying so, rather than the "no longer signed in" the missing
 * SameSite=Lax cookie would lead to, or a change made with a CSRF token that leaked. Whoever sent
 * it is known from `Sec-Fetch-Site` (any value but `same-origin`, `same-site` too, is foreign) or,
 * from a browser that does not send it, `Origin` (any origin but the issuer's). `Origin: null`
 * says nothing: the pages' `Referrer-Policy: no-referrer` has browsers send it with their own
 * forms (Fetch, "serializing a request origin"), so from a browser without `Sec-Fetch-Site`
 * (Safari before 16.4) it is the service's own page as often as not. A request that says nothing
 * (`null`, or neither header: curl, an older client) goes on to the form's CSRF check as before.
 *
 * Only for the product's pages: the engine's endpoints take forms from other sites by design
 * (an authorization request or a sign-out request posted by a client's page).
 */
export function sameOriginForms(issuer: string): Middleware {
  const ownOrigin = new URL(issuer).origin;
  return (ctx, next) => {
    if (SAFE_METHODS.has(ctx.method) || !fromAnotherSite(ctx.get('Sec-Fetch-Site'), ctx.get('Origin'), ownOrigin)) return next();
    // A page's form: its refusal is the error page, wherever the path otherwise answers in JSON (the engine's sign-out confirmation).
    ctx.state.errorFormat = 'page';
    // The error page's words for the code: ERROR_TEXTS in render.ts.
    throw new HttpError(403, 'cross_site_form', '');
  };
}

/** Koa reads a header it was not sent as ''. */
function fromAnotherSite(fetchSite: string, origin: string, ownOrigin: string): boolean {
  if (fetchSite !== '') return fetchSite.toLowerCase() !== 'same-origin';
  return origin !== '' && origin !== 'null' && origin.toLowerCase() !== ownOrigin;
}
