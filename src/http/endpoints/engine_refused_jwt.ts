import type { Context } from 'koa';

import { oidcOf } from '../../engine/context.ts';

/**
 * The engine answers `unsupported_token_type` when asked to introspect or revoke a JWT access
 * token, having authenticated the client first: the request's token and client when it did, for
 * the host to finish the job (introspection.ts, revocation.ts).
 */
export function engineRefusedJwt(ctx: Context) {
  const body = ctx.body as { error?: string } | undefined;
  if (ctx.status !== 400 || body?.error !== 'unsupported_token_type') return undefined;
  const oidc = oidcOf(ctx);
  const token = oidc?.params?.token;
  const client = oidc?.client;
  if (typeof token !== 'string' || !client) return undefined;
  return { token, client };
}
