import type { Context } from 'koa';

import { redirectTarget } from './client_display.ts';
import { renderPage } from './render.ts';

/** An error answer the engine addressed to a client the server has no reason to trust (src/http/endpoints/authorization.ts). */
export interface HeldError {
  clientId: string;
  clientName: string | undefined;
  redirectUri: string;
  /** The response the engine would have sent (error, error_description, state, iss). */
  response: Record<string, string>;
  /** The engine's own redirect (query or fragment response mode); absent for form_post. */
  location: string | undefined;
}

/**
 * An error the engine would have sent straight to an unvetted client: the user reads what went
 * wrong and decides whether to go back (src/http/endpoints/authorization.ts).
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

