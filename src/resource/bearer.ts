import type { Context } from 'koa';

/** The token of an `Authorization: Bearer <token>` header (RFC 6750 section 2.1), if there is one. */
export function bearerToken(ctx: Context): string | undefined {
  return /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i.exec(ctx.get('authorization'))?.[1];
}

/** RFC 6750 section 3: 401 for a missing or bad token, 403 for a token lacking a scope. */
export function refuseBearer(ctx: Context, status: 401 | 403, error?: 'invalid_token' | 'insufficient_scope', description?: string, scope?: string): void {
  const params = ['realm="oauth"'];
  if (error) params.push(`error="${error}"`);
  if (description) params.push(`error_description="${description}"`);
  if (scope) params.push(`scope="${scope}"`);
  ctx.status = status;
  ctx.set('WWW-Authenticate', `Bearer ${params.join(', ')}`);
  ctx.set('Cache-Control', 'no-store');
  ctx.body = error ? { error, error_description: description } : { error: 'invalid_request', error_description: 'an access token is required' };
}
