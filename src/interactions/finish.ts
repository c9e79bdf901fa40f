import type { Context } from 'koa';
import type { InteractionResults, Provider } from 'oidc-provider';

/**
 * Stores the interaction's result and sends the browser back to the engine (303), as a Koa
 * response. The engine's own interactionFinished ends the Node response itself, before the
 * store's commit (src/http/commit_before_response.ts): the browser could then reach an instance
 * that does not see the result yet (WORKERS on one SQLite file) and be shown the login page
 * again, or be sent on with a sign-in or consent that a failed commit did not keep.
 */
export async function finishInteraction(ctx: Context, provider: Provider, result: InteractionResults, options: { mergeWithLastSubmission: boolean }): Promise<void> {
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, options);
  ctx.status = 303;
  ctx.redirect(returnTo);
}
