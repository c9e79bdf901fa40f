import { errors, Provider } from 'oidc-provider';
import type { Context } from 'koa';

import type { ModelStore } from '../../adapters/store.ts';
import { nowSeconds } from '../shared/clock.ts';

/**
 * How long after an RFC 7592 update or delete claimed its registration access token another
 * request with that token takes the claim over as abandoned (a process that died mid-request):
 * far longer than the request's few store writes, each bounded by its timeout.
 */
const CLAIM_ABANDONED_AFTER_SECONDS = 20;

/** The engine's RFC 7592 routes that write: an update stores the client again, a delete destroys it. */
const WRITING_ROUTES = new Set(['client_update', 'client_delete']);

/**
 * An RFC 7592 update or delete claims the registration access token it came with (the store's
 * atomic consume) just before it writes the client: of any number of requests holding one token,
 * at once, on any instance, one writes, and the others are refused `invalid_token` having written
 * nothing. Without it, each update that had found the token stored its own successor (a copied
 * token became as many live ones), and an update that had found it before a delete destroyed it
 * stored the deleted client again after the delete's 204. `storeIdOf` maps the token to its
 * record's id. The claim is given back once the request is answered (releaseRegistrationTokenClaim).
 */
export function claimRegistrationToken(tokens: ModelStore, storeIdOf: (token: string) => string): () => Promise<void> {
  return async () => {
    const ctx = Provider.ctx;
    if (!ctx?.oidc || !WRITING_ROUTES.has(ctx.oidc.route)) return;
    const token = ctx.oidc.entities.RegistrationAccessToken as { jti: string } | undefined;
    if (!token || ctx.state.registrationTokenClaim) return;
    const storeId = storeIdOf(token.jti);
    const claim = await tokens.consume(storeId, nowSeconds() - CLAIM_ABANDONED_AFTER_SECONDS);
    if (!claim) throw new errors.InvalidToken('the registration access token is being used by another request, or no longer exists');
    ctx.state.registrationTokenClaim = { storeId, claim };
  };
}

/**
 * Gives the claim back once the request is answered. A token that succeeded is gone by then (an
 * update's is replaced by its successor, a delete's destroyed), and nothing is left to give back;
 * one whose request failed (a store outage) works again, so the client's retry with the only
 * token it holds applies the update. Best effort: a claim not given back is taken over once
 * abandoned.
 */
export async function releaseRegistrationTokenClaim(tokens: ModelStore, ctx: Context): Promise<void> {
  const held = ctx.state.registrationTokenClaim;
  if (!held) return;
  delete ctx.state.registrationTokenClaim;
  await tokens.release(held.storeId, held.claim).catch(() => undefined);
}
