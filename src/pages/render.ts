import { randomBytes } from 'node:crypto';

import type { Context } from 'koa';

import { noStore } from '../shared/no_store.ts';
import { htmlContentSecurityPolicy, type HtmlPolicy } from './csp.ts';

/** Renders a view inside the layout, with the page's Content-Security-Policy and no caching. */
export async function renderPage(ctx: Context, view: string, title: string, data: Record<string, unknown>, policy?: HtmlPolicy): Promise<void> {
  const nonce = randomBytes(16).toString('base64');
  ctx.set('Content-Security-Policy', htmlContentSecurityPolicy(nonce, policy));
  noStore(ctx);
  ctx.type = 'html';
  await ctx.render(view, { ...data, title, cspNonce: nonce });
}

/** Headings for the error codes the pages use; a message of its own, or (when empty) the description alone. */
const ERROR_HEADINGS: Record<string, { heading: string; message: string }> = {
  access_denied: { heading: 'Not allowed', message: '' },
  not_found: { heading: 'Not found', message: '' },
  invalid_client: {
    heading: 'Unknown application',
    message: 'The application that sent you here is not registered with this server. Nothing was shared with it.',
  },
  invalid_redirect_uri: {
    heading: 'Unregistered return address',
    message: 'The application asked to send you to an address it has not registered, so you were not sent anywhere.',
  },
  invalid_request: {
    heading: 'Invalid request',
    message: 'The application sent a request this server cannot process.',
  },
  session_expired: {
    heading: 'This page has expired',
    message: 'The sign-in took too long or was already completed. Go back to the application and start again.',
  },
  temporarily_unavailable: {
    heading: 'Service unavailable',
    message: 'The service is temporarily unavailable. Try again in a moment.',
  },
};

/** The error page: for errors that must not redirect back to the client. */
export async function renderErrorPage(ctx: Context, error: string, description?: string): Promise<void> {
  const known = ERROR_HEADINGS[error];
  const heading = known?.heading ?? 'Something went wrong';
  const message = known?.message ? `${known.message}${description ? ` (${description})` : ''}` : (description ?? 'The request could not be completed.');
  await renderPage(ctx, 'error', heading, { heading, message, error });
}
