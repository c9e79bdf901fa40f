import { errors } from 'oidc-provider';

/** `openid` is accepted so OpenID Connect clients get an ID token; the product's scopes are api and profile. */
export const SUPPORTED_SCOPES = ['openid', 'api', 'profile'] as const;
export const DEFAULT_SCOPE = 'api';

/**
 * OpenID Connect Core 11's way to ask for a refresh token, sent with `prompt=consent`. This
 * server issues one with every code grant whatever the scope, so the value asks for nothing more:
 * an authorization request carrying it is answered as without it. (The engine drops it itself
 * from a request without `prompt=consent`; with it, it would reach the check below as unknown.)
 */
const OFFLINE_ACCESS = 'offline_access';

/** How much of the unknown scope values a refusal names back. */
const SHOWN_SCOPE_LENGTH = 200;

/**
 * The scope a request really asks for: the default when none is given, an `invalid_scope`
 * error naming the values this server does not know.
 */
export function effectiveScope(requested: string | undefined): string {
  if (requested === undefined || requested.trim() === '') return DEFAULT_SCOPE;
  const values = requested.split(' ').filter(Boolean);
  const unknown = values.filter((value) => !(SUPPORTED_SCOPES as readonly string[]).includes(value));
  if (unknown.length) {
    // Named back in brief: a request of any length gets an answer of a few hundred bytes.
    const named = unknown.join(' ');
    const shown = named.length > SHOWN_SCOPE_LENGTH ? `${named.slice(0, SHOWN_SCOPE_LENGTH)}...` : named;
    // A stock OpenID Connect client asks for `openid profile email` by default: say where its email is.
    const email = unknown.includes('email') ? ' (the email and email_verified claims come with profile)' : '';
    throw new errors.InvalidScope(`unsupported scope value${unknown.length > 1 ? 's' : ''}: ${shown}; supported: ${SUPPORTED_SCOPES.join(' ')}${email}`, shown);
  }
  return [...new Set(values)].join(' ');
}

/** The scope an authorization request really asks for: as effectiveScope(), `offline_access` set aside. */
export function authorizationScope(requested: string | undefined): string {
  const values = requested?.split(' ').filter((value) => value !== OFFLINE_ACCESS);
  return effectiveScope(values?.join(' '));
}

/** Whether a request names a scope of its own, rather than leaving it to the default. */
export function namesAScope(requested: string | undefined): boolean {
  return requested?.split(' ').some((value) => value !== '' && value !== OFFLINE_ACCESS) ?? false;
}

/**
 * The scope, checked against the values the client registered (RFC 7591 `scope`: those it may ask
 * for), when it registered any. The engine checks the values an authorization request names
 * against them, before the default is filled in; this checks the default too, and the
 * client_credentials grant, which is the product's own. A request that named no scope is told the
 * default is what was refused.
 */
export function withinClientScope(scope: string, registered: string | undefined, named: boolean): string {
  if (registered === undefined) return scope;
  const allowed = new Set(registered.split(' '));
  const refused = scope.split(' ').filter((value) => !allowed.has(value));
  if (!refused.length) return scope;
  const description = named
    ? `requested scope is not allowed: this client is registered for ${registered}`
    : `no scope was requested, and this client is not registered for the default, ${DEFAULT_SCOPE}: ask for one of ${registered}`;
  throw new errors.InvalidScope(description, refused.join(' '));
}
