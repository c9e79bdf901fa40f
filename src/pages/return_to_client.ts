import type { Context } from 'koa';

import { redirectTarget } from './client_display.ts';
import { renderPage } from './render.ts';

/** The `error_description` of an `access_denied` the user chose (Deny on the consent page), not one the server decided. */
export const DENIED_BY_THE_USER = 'the user denied the request';

/** An error answer the engine addressed to a client the server has no reason to trust (src/http/endpoints/authorization.ts). */
export interface HeldError {
  clientId: string;
  clientName: string | undefined;
  redirectUri: string;
  /** The response the engine would have sent (error, error_description, state, iss). */
  response: Record<string, string>;
  /** The engine's own redirect (query or fragment response mode); absent for form_post. */
  location: string | undefined;
  /** The sign-out page, when someone is signed in: the account may be the wrong one. */
  signOutUrl: string | undefined;
}

/**
 * An error the engine would have sent straight to an unvetted client: the user reads what went
 * wrong and decides whether to go back (src/http/endpoints/authorization.ts).
 */
export async function renderReturnToClientPage(ctx: Context, held: HeldError): Promise<void> {
  const clientName = held.clientName || held.clientId;
  const { error, error_description: description, ...rest } = held.response;
  const denied = error === 'access_denied';
  const heading = !denied ? `${clientName} sent a request this server cannot accept`
    : description === DENIED_BY_THE_USER ? `You did not allow ${clientName}` : `${clientName} was not given access`;
  const message = denied
    ? `Nothing was shared with ${clientName}.`
    : `The request was not carried out and nothing was shared with ${clientName}.`;
  const target = redirectTarget(held.redirectUri);
  await renderPage(ctx, 'return_to_client', heading, {
    heading, message, error, description, clientName, targetLabel: target.label, signOutUrl: held.signOutUrl,
    location: held.location, redirectUri: held.redirectUri, fields: { error, ...(description ? { error_description: description } : {}), ...rest },
  }, { formAction: held.location ? [] : target.formAction });
}

