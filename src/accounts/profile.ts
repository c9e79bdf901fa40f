import type { Role, User, Workspace } from '../../adapters/store.ts';

export interface ProfileClaims {
  name: string;
  given_name?: string;
  family_name?: string;
  preferred_username: string;
  updated_at: number;
  email: string;
  email_verified: boolean;
  workspace?: { id: string; name: string; role: Role };
}

/**
 * The claims the `profile` scope releases, from the ID token and the userinfo endpoint alike:
 * the standard claims (OpenID Connect Core 5.1) this server holds a value for, and the workspace.
 * Users sign in with their email address, so it is also their preferred username. An admin typed
 * it in and nobody proved they own it, so `email_verified` is false: a client must not link
 * accounts by it. Profiles are never edited after creation, so they were last updated then.
 */
export function profileClaims(user: User, workspace?: Workspace & { role: Role }): ProfileClaims {
  return {
    name: user.name,
    ...(user.givenName ? { given_name: user.givenName } : {}),
    ...(user.familyName ? { family_name: user.familyName } : {}),
    preferred_username: user.email,
    updated_at: user.createdAt,
    email: user.email,
    email_verified: false,
    ...(workspace ? { workspace: { id: workspace.id, name: workspace.name, role: workspace.role } } : {}),
  };
}

export const PROFILE_CLAIM_NAMES = ['name', 'given_name', 'family_name', 'preferred_username', 'updated_at', 'email', 'email_verified', 'workspace'] as const;
