import Provider, { errors, type KoaContextWithOIDC } from 'oidc-provider';

import type { NewInteractionLimit } from '../rate_limits/limits.ts';

/**
 * Called by the Interaction adapter before it stores an interaction. Within an authorization
 * request (the engine's request context: Provider.ctx) the interaction is a new one, about to be
 * stored and redirected to: the limit counts it for the client address, and past the limit the
 * request is refused here, so nothing is stored and no interaction cookie is set. The engine
 * answers what this throws with its error page (renderError), never with a redirect to the
 * client: the refusal says nothing about the client's request, and may concern a client no one
 * vetted. An interaction stored on another route (the engine resuming after a page, the pages
 * saving their result) continues one already counted.
 */
export function limitNewInteractions(limit: NewInteractionLimit): () => Promise<void> {
  return async () => {
    const ctx: KoaContextWithOIDC | undefined = Provider.ctx;
    if (!ctx || ctx.oidc?.route !== 'authorization') return;
    const refusal = await limit(ctx);
    if (!refusal) return;
    // The engine's error handler keeps the response's headers; the error page is the answer.
    ctx.set('Retry-After', String(refusal.retryAfter));
    throw tooManyInteractions(refusal.description);
  };
}

/**
 * RFC 6749's code for "try again later" (as the host's other 429s, src/rate_limits/limits.ts);
 * the status is the engine's answer's.
 */
function tooManyInteractions(description: string): errors.OIDCProviderError {
  const error = new errors.CustomOIDCProviderError('temporarily_unavailable', description);
  error.status = 429;
  error.statusCode = 429;
  error.allow_redirect = false;
  return error;
}
