import { randomBytes } from 'node:crypto';

import type { Context } from 'koa';

import type { HeldError } from '../http/endpoints/authorization.ts';
import { cspOrigin, htmlContentSecurityPolicy, type HtmlPolicy } from '../http/security_headers.ts';

/** Renders a view inside the layout, with the page's Content-Security-Policy and no caching. */
export async function renderPage(ctx: Context, view: string, title: string, data: Record<string, unknown>, policy?: HtmlPolicy): Promise<void> {
  const nonce = randomBytes(16).toString('base64');
  ctx.set('Content-Security-Policy', htmlContentSecurityPolicy(nonce, policy));
  ctx.set('Cache-Control', 'no-store');
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

/**
 * An error the engine would have sent straight to an unvetted client: the user reads what went
 * wrong and decides whether to go back (held_error_redirects.ts).
 */
export async function renderReturnToClientPage(ctx: Context, held: HeldError): Promise<void> {
  const clientName = held.clientName || held.clientId;
  const { error, error_description: description, ...rest } = held.response;
  const denied = error === 'access_denied';
  const heading = denied ? `You did not allow ${clientName}` : `${clientName} sent a request this server cannot accept`;
  const message = denied
    ? `Nothing was shared with ${clientName}.`
    : `The request was not carried out and nothing was shared with ${clientName}.`;
  const target = redirectTarget(held.redirectUri);
  await renderPage(ctx, 'return_to_client', heading, {
    heading, message, error, description, clientName, targetLabel: target.label,
    location: held.location, redirectUri: held.redirectUri, fields: { error, ...(description ? { error_description: description } : {}), ...rest },
  }, { formAction: held.location ? [] : target.formAction });
}

/** Where a redirect URI sends the user, in words a person recognizes: the host, or the app scheme. */
export function redirectTarget(redirectUri: string): { label: string; formAction: string[] } {
  const url = URL.parse(redirectUri);
  if (!url) return { label: redirectUri, formAction: [] };
  if (url.protocol === 'https:' || url.protocol === 'http:') {
    const origin = cspOrigin(url);
    return { label: url.host, formAction: origin ? [origin] : [] };
  }
  return { label: url.protocol, formAction: [url.protocol] };
}

/** The registered metadata the pages show of an application (the engine's Client has these). */
export interface ClientMetadata {
  readonly clientName?: string | undefined;
  readonly logoUri?: string | undefined;
  readonly policyUri?: string | undefined;
  readonly tosUri?: string | undefined;
}

/** What the login and consent pages show of the application asking. */
export interface ClientDisplay {
  name: string;
  /** The logo to show, and the origin the page's policy must open `img-src` to for it. */
  logo?: { src: string; origin: string };
  policyUri?: string;
  tosUri?: string;
  /** Set when an operator let the application in; one that registered itself is labelled so on the consent page. */
  vetted?: true;
}

/**
 * The application's name, logo and documents (RFC 7591 `client_name`, `logo_uri`, `policy_uri`,
 * `tos_uri`), as the pages may show them. The engine accepts only web URIs at registration;
 * this checks again, so a page never carries a `javascript:`, `data:` or other non-http(s) URL,
 * nor one with credentials in it, and shows a logo only if its origin can be named in the policy.
 */
export function clientDisplay(clientId: string, client: ClientMetadata | undefined, vetted = false): ClientDisplay {
  const display: ClientDisplay = { name: client?.clientName || clientId };
  if (vetted) display.vetted = true;
  const logo = webUrl(client?.logoUri);
  const logoOrigin = logo && cspOrigin(logo);
  if (logo && logoOrigin) display.logo = { src: logo.href, origin: logoOrigin };
  const policy = webUrl(client?.policyUri);
  if (policy) display.policyUri = policy.href;
  const tos = webUrl(client?.tosUri);
  if (tos) display.tosUri = tos.href;
  return display;
}

function webUrl(value: unknown): URL | undefined {
  if (typeof value !== 'string') return undefined;
  const url = URL.parse(value);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) return undefined;
  if (url.username || url.password) return undefined;
  return url;
}
