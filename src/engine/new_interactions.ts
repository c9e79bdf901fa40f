import Provider, { type KoaContextWithOIDC } from 'oidc-provider';

import type { NewInteractionLimit } from '../rate_limits/limits.ts';
import { refusedByLimit } from './limit_refusals.ts';

/**
 * Called by the Interaction adapter before it stores an interaction. Within an authorization
 * request (the engine's request context: Provider.ctx) the interaction is a new one, about to be
 * stored and redirected to: the limit counts it for the client address, and past the limit the
 * request is refused here (limit_refusals.ts), so nothing is stored and no interaction cookie is
 * set. An interaction stored on another route (the engine resuming after a page, the pages
 * saving their result) continues one already counted.
 */
export function limitNewInteractions(limit: NewInteractionLimit): () => Promise<void> {
  return async () => {
    const ctx: KoaContextWithOIDC | undefined = Provider.ctx;
    if (!ctx || ctx.oidc?.route !== 'authorization') return;
    const refusal = await limit(ctx);
    if (refusal) throw refusedByLimit(ctx, refusal);
  };
}
