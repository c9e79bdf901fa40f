import type { Context } from 'koa';

import { HttpError } from '../shared/http_error.ts';

/** The token of an `Authorization: Bearer <token>` header (RFC 6750 section 2.1), if there is one. */
export function bearerToken(ctx: Context): string | undefined {
  return /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i.exec(ctx.get('authorization'))?.[1];
}

/**
 * The token of the header or, for a form-encoded POST, of its `access_token` parameter (RFC 6750
 * section 2.2); the form must have been parsed into `ctx.request.body`. The query string (section
 * 2.3) is not read: tokens in URLs end up in logs.
 */
export function headerOrFormToken(ctx: Context): string | undefined {
  const header = bearerToken(ctx);
  const body = ctx.request.body as Record<string, unknown> | undefined;
  const form = ctx.method === 'POST' && ctx.is('application/x-www-form-urlencoded') ? body?.access_token : undefined;
  if (form === undefined) return header;
  if (header !== undefined || ctx.get('authorization')) throw new HttpError(400, 'invalid_request', 'send the access token once: in the Authorization header or in the form body, not both');
  return typeof form === 'string' && form !== '' ? form : undefined;
}

export interface BearerRefusal {
  /** 401 for a missing or bad credential, 403 for one lacking a scope (RFC 6750 section 3.1). */
  status: 401 | 403;
  /** None when the request carried no credential: RFC 6750 section 3.1 asks for no error code then. */
  error?: 'invalid_token' | 'insufficient_scope';
  description?: string;
  /** The scope the request needs (insufficient_scope). */
  scope?: string;
  realm?: string;
  /** Where the protected resource's metadata is (RFC 9728 section 5.1). */
  resourceMetadata?: string;
}

/** The RFC 6750 refusal: the challenge in `WWW-Authenticate`, the same error as the body. */
export function bearerRefusal(refusal: BearerRefusal): HttpError {
  const params: string[] = [];
  if (refusal.realm) params.push(`realm="${refusal.realm}"`);
  if (refusal.resourceMetadata) params.push(`resource_metadata="${refusal.resourceMetadata}"`);
  if (refusal.error) params.push(`error="${refusal.error}"`);
  if (refusal.error && refusal.description) params.push(`error_description="${refusal.description}"`);
  if (refusal.scope) params.push(`scope="${refusal.scope}"`);
  return new HttpError(refusal.status, refusal.error ?? 'invalid_request', refusal.description ?? 'an access token is required', {
    'WWW-Authenticate': params.length ? `Bearer ${params.join(', ')}` : 'Bearer',
  });
}
