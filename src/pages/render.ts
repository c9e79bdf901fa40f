import { randomBytes } from 'node:crypto';

import type { Context } from 'koa';

import { noStore } from '../shared/no_store.ts';
import { htmlContentSecurityPolicy, type HtmlPolicy } from './csp.ts';
import { siteOfRequest } from './site.ts';

/**
 * Renders a view inside the layout (which shows the service's name and logo, `ctx.state.site`),
 * with the page's Content-Security-Policy and no caching.
 */
export async function renderPage(ctx: Context, view: string, title: string, data: Record<string, unknown>, policy: HtmlPolicy = {}): Promise<void> {
  const site = siteOfRequest(ctx);
  const nonce = randomBytes(16).toString('base64');
  const imgSrc = [...(site.logo ? [site.logo.origin] : []), ...(policy.imgSrc ?? [])];
  ctx.set('Content-Security-Policy', htmlContentSecurityPolicy(nonce, { ...policy, imgSrc }));
  noStore(ctx);
  ctx.type = 'html';
  await ctx.render(view, { ...data, title, cspNonce: nonce });
}

/** What an error page says when the refusal brings no sentence of its own: what happened, and what to do next. */
interface ErrorText {
  heading: string;
  message: string;
  next: string;
}

const ERROR_TEXTS: Record<string, ErrorText> = {
  access_denied: { heading: 'Not allowed', message: 'You are not allowed to do this.', next: '' },
  not_found: { heading: 'Not found', message: 'There is nothing at this address.', next: '' },
  // A settings invitation link that is unknown, expired, used, cancelled or void: which of these is not said.
  invalid_invitation: {
    heading: 'This invitation is not valid',
    message: 'This invitation link is not valid any more: it expired, was used or was cancelled. Ask the workspace admin for a new one.',
    // One paragraph, what happened and what to do, as the page showed it when the refusal carried the sentence.
    next: '',
  },
  invalid_client: {
    heading: 'Unknown application',
    message: 'The application that sent you here is not registered with this server. Nothing was shared with it.',
    next: 'Go back to the application and try again. If this happens again, tell its developer: the application has to register with this server first.',
  },
  invalid_client_metadata: {
    heading: 'Application not accepted',
    message: 'The application describes itself in a way this server does not accept, so nothing was shared with it.',
    next: 'Go back to the application and tell its developer, quoting the reference below.',
  },
  invalid_redirect_uri: {
    heading: 'Unregistered return address',
    message: 'The application asked to send you to an address it has not registered, so you were not sent anywhere.',
    next: 'Go back to the application and tell its developer: it has to use a return address it registered.',
  },
  invalid_request_uri: {
    heading: 'This sign-in request has expired',
    message: 'The application’s sign-in request was already used or has expired, so nothing was shared with it.',
    next: 'Go back to the application and start again.',
  },
  invalid_request: {
    heading: 'Invalid request',
    message: 'The application sent a request this server cannot process. Nothing was shared with it.',
    next: 'Go back to the application and try again. If this happens again, tell its developer, quoting the reference below.',
  },
  // A form of the service's own pages sent from another site's page (src/pages/same_origin_forms.ts).
  cross_site_form: {
    heading: 'Sent from another site',
    message: 'This form was sent from another website, not from this service’s own page, so nothing was done.',
    next: 'To do it, open the page again from this service (type its address or use its links) and send the form from there.',
  },
  session_expired: {
    heading: 'This page has expired',
    message: 'The sign-in took too long or was already completed.',
    // Back from the consent page lands on the sign-in page of a step already done.
    next: 'If you came here with your browser’s Back button, its Forward button returns you to where you were. Otherwise go back to the application and start again.',
  },
  temporarily_unavailable: {
    heading: 'Service unavailable',
    message: 'The service is temporarily unavailable.',
    next: 'Try again in a moment.',
  },
};

/** Any refusal with 429, whatever its code (`temporarily_unavailable` for a rate limit, RFC 6749). */
const TOO_MANY: ErrorText = {
  heading: 'Too many requests',
  message: 'Too many requests came from your network in a short time.',
  next: 'Wait a while, then try again.',
};

const UNKNOWN_ERROR: ErrorText = {
  heading: 'Something went wrong',
  message: 'This server could not complete the request.',
  next: 'Try again in a moment. If this keeps happening, tell the administrator of this service, quoting the reference below.',
};

/**
 * The error page, for errors that must not redirect back to the client. `description` is a
 * sentence written for the person reading (the host's refusals), saying what happened and what to
 * do; without one the page says what the code means in plain words. The engine's own
 * descriptions are never shown (src/http/engine_pages.ts): they are written for developers, and
 * the log has them under the page's reference. Every error page links back: to the settings area
 * from its pages and its sign-in, else to the service's home page.
 */
export async function renderErrorPage(ctx: Context, error: string, description?: string): Promise<void> {
  // A refusal with a code of no text of its own is still the request's fault when its status says so.
  const text = ctx.status === 429 ? TOO_MANY : ERROR_TEXTS[error] ?? (ctx.status < 500 ? ERROR_TEXTS.invalid_request! : UNKNOWN_ERROR);
  const site = siteOfRequest(ctx);
  const inSettings = ctx.path === site.settings || ctx.path.startsWith(`${site.settings}/`) || ctx.state.settingsSignIn === true;
  await renderPage(ctx, 'error', text.heading, {
    heading: text.heading,
    message: description || text.message,
    next: description ? '' : text.next,
    error,
    back: inSettings ? { href: site.settings, label: 'Back to settings' } : { href: site.home, label: `Go to the ${site.name} home page` },
  });
}
