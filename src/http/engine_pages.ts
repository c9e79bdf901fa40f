import { errors, type KoaContextWithOIDC } from 'oidc-provider';

import type { Accounts } from '../accounts/accounts.ts';
import { whyDocumentNotFetched } from '../clients/metadata_documents.ts';
import { LimitRefusal } from '../engine/limit_refusals.ts';
import type { EnginePages } from '../engine/provider.ts';
import { logoutPages } from '../interactions/logout.ts';
import { renderErrorPage } from '../pages/render.ts';
import { inWords } from '../shared/words.ts';
import { markErrorPageShown } from './endpoints/authorization.ts';
import { isBackendOutage } from './errors.ts';

/**
 * The pages the engine shows, in the product's layout: its error page, for errors that must not
 * redirect to the client (an unknown client, an unregistered redirect_uri; a store outage is a
 * 503), and the sign-out question and its answer, which also answer a sign-out form that came
 * too late (src/interactions/logout.ts).
 */
export function enginePages(accounts: Accounts, issuer: string): EnginePages {
  const { answerStaleConfirmation, ...logout } = logoutPages({ accounts, issuer });
  return {
    renderError: async (ctx, out, error) => {
      if (isBackendOutage(error)) ctx.status = 503;
      const engineCode = String(out.error ?? 'server_error');
      // A sign-out form that came too late is no error of an application's: the sign-out pages answer it.
      if (await answerStaleConfirmation(ctx, engineCode)) return;
      markErrorPageShown(ctx);
      const { code, description } = shownError(ctx, engineCode, error);
      await renderErrorPage(ctx, code, description);
    },
    ...logout,
  };
}

const SIGN_OUT_REFUSED = 'The application asked to sign you out in a way this server cannot accept, for example to send you afterwards to an address it has not registered. '
  + 'Nothing changed: you were not signed out and not sent anywhere. Go back to the application and try again; if this happens again, tell its developer.';

const RETURN_ADDRESS_MISSING = 'The application did not say where to send you back (its redirect_uri, the return address it registered), so you were not sent anywhere. '
  + 'Go back to the application and tell its developer: a request must name one of its registered return addresses.';

const DOCUMENT_NOT_FETCHED = 'The application that sent you here describes itself in a document this server could not read, so nothing was shared with it';

function engineDescription(error: unknown): string {
  const description = (error as { error_description?: unknown } | undefined)?.error_description;
  return typeof description === 'string' ? description : '';
}

/**
 * What the page says of an engine error: its code, and where the code alone would mislead, a
 * sentence of the host's. The engine's own `error_description` ("client is invalid") is for
 * developers: the log has it (engine_events.ts), under the reference the page shows.
 */
function shownError(ctx: KoaContextWithOIDC, code: string, error: unknown): { code: string; description?: string } {
  if (isBackendOutage(error)) return { code: 'temporarily_unavailable' };
  // The engine's resume found no interaction cookie: the sign-in was finished or abandoned elsewhere.
  if (error instanceof errors.SessionNotFound) return { code: 'session_expired' };
  if (error instanceof LimitRefusal) {
    const wait = Number(ctx.response.get('Retry-After'));
    const when = Number.isInteger(wait) && wait > 0 ? `in ${inWords(wait)}` : 'later';
    return { code, description: `${error.inWordsOfThePerson} Try again ${when}.` };
  }
  // The logout request itself: an unregistered post_logout_redirect_uri, an id_token_hint not of this server's, a client_id that does
  // not match it; or one naming no client of this server (the engine's invalid_client), not an "unknown application" sending the
  // person: shown as the invalid request it is, the log keeping the engine's code under the page's reference.
  if (ctx.oidc?.route === 'end_session' && (code === 'invalid_request' || code === 'invalid_client')) return { code: 'invalid_request', description: SIGN_OUT_REFUSED };
  // Not an application that never registered: one that describes itself at an address this server could not read.
  const notFetched = whyDocumentNotFetched(error);
  if (notFetched) return { code, description: `${DOCUMENT_NOT_FETCHED} (${notFetched}). Go back to the application and try again later; if this happens again, tell its developer.` };
  // Said in words of the person's (the conformance suite checks the page says what is wrong with it).
  if (code === 'invalid_request' && /\bredirect_uri\b/.test(engineDescription(error))) return { code, description: RETURN_ADDRESS_MISSING };
  return { code };
}
