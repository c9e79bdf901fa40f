import type { Context } from 'koa';

import { SUPPORTED_SCOPES } from '../engine/scopes.ts';
import { inErrorDescriptionCharset } from '../shared/error_description.ts';
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
  /** Every value the request sent (or its request object named), which the page does not show back. */
  requestValues: readonly string[];
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
    heading, message, error, description: shownReason(error, description, held.requestValues), clientName, targetLabel: target.label, signOutUrl: held.signOutUrl,
    location: held.location, redirectUri: held.redirectUri, fields: { error, ...(description ? { error_description: description } : {}), ...rest },
  }, { formAction: held.location ? [] : target.formAction });
}

/** The reasons of the codes whose descriptions name back what the request sent, in words of the page's own. */
const REASONS_OF_THE_PAGE: Readonly<Record<string, string>> = {
  invalid_scope: `the request asks for a scope this server does not offer (it offers ${SUPPORTED_SCOPES.join(', ')})`,
  invalid_target: 'the request names an API (resource) this server issues no tokens for',
};

/**
 * The reason the page gives: the engine's description, unless it repeats a word of the request (a
 * scope, a resource it names back): whoever made the link chose those, and here they would read
 * as the server's own words ("call this number"). Then the code's reason in the page's words, or
 * the code alone; the application still gets the description (the way back carries it), and the
 * log has it under the page's reference.
 */
function shownReason(error: string, description: string | undefined, requestValues: readonly string[]): string | undefined {
  if (description === undefined || !repeatsTheRequest(description, requestValues)) return description;
  return REASONS_OF_THE_PAGE[error];
}

/**
 * How long a description's word must be to count as a word of the request named back cut short
 * when only its beginning is the same: a refusal names back only so much of a value
 * (src/engine/scopes.ts, src/engine/resource_indicators.ts), and the cut may split its last character.
 */
const CUT_WORD_LENGTH = 16;

/**
 * Whether `description` (in the error_description charset, as the page shows it) holds a word of
 * the request's values, whole or cut short. Compared in the same charset: a tab or a non-ASCII
 * space, percent-encoded there, splits no word in either.
 */
function repeatsTheRequest(description: string, requestValues: readonly string[]): boolean {
  const sent = new Set(requestValues.flatMap((value) => wordsOf(inErrorDescriptionCharset(value))));
  const cutShort = (word: string) => word.length >= CUT_WORD_LENGTH && [...sent].some((whole) => whole.startsWith(word.slice(0, CUT_WORD_LENGTH)));
  return wordsOf(description).some((word) => sent.has(word) || cutShort(word));
}

/** The words of a text, without the punctuation a sentence puts around a word it names ("value: x;"). */
function wordsOf(text: string): string[] {
  return text.split(' ').map((word) => word.replace(/^[;:,.()'"]+|[;:,.()'"]+$/g, '')).filter(Boolean);
}
