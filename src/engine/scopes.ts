import { errors } from 'oidc-provider';

/** `openid` is accepted so OpenID Connect clients get an ID token; the product's scopes are api and profile. */
export const SUPPORTED_SCOPES = ['openid', 'api', 'profile'] as const;
export const DEFAULT_SCOPE = 'api';

/**
 * The scope a request really asks for: the default when none is given, an `invalid_scope`
 * error naming the values this server does not know.
 */
export function effectiveScope(requested: string | undefined): string {
  if (requested === undefined || requested.trim() === '') return DEFAULT_SCOPE;
  const values = requested.split(' ').filter(Boolean);
  const unknown = values.filter((value) => !(SUPPORTED_SCOPES as readonly string[]).includes(value));
  if (unknown.length) {
    throw new errors.InvalidScope(`unsupported scope value${unknown.length > 1 ? 's' : ''}: ${unknown.join(' ')}; supported: ${SUPPORTED_SCOPES.join(' ')}`, unknown.join(' '));
  }
  return [...new Set(values)].join(' ');
}
