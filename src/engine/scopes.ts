import { errors } from 'oidc-provider';

/** `openid` is accepted so OpenID Connect clients get an ID token; the product's scopes are api and profile. */
export const SUPPORTED_SCOPES = ['openid', 'api', 'profile'] as const;
export const DEFAULT_SCOPE = 'api';

/** The consent screen's plain-language description of each scope. */
export const SCOPE_DESCRIPTIONS: Record<string, string> = {
  openid: 'Confirm who you are',
  api: 'Read and change the workspace\'s records and metadata (Core and Metadata APIs)',
  profile: 'See your name, email address and workspace',
};

const CLAIM_LABELS: Record<string, string> = {
  name: 'name',
  given_name: 'given name',
  family_name: 'family name',
  preferred_username: 'username',
  updated_at: 'when your profile last changed',
  email: 'email address',
  email_verified: 'whether your email address is verified',
  workspace: 'workspace and role',
};

/** The consent screen's description of claims asked for by name (the `claims` parameter). */
export function describeClaims(names: string[]): string {
  return `See these details of your profile: ${names.map((name) => CLAIM_LABELS[name] ?? name).join(', ')}`;
}

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
