import type { Role, User, Workspace } from '../../adapters/store.ts';

export interface ProfileClaims {
  name: string;
  given_name?: string;
  family_name?: string;
  email: string;
  workspace?: { id: string; name: string; role: Role };
}

/** The claims the `profile` scope releases, from the ID token and the userinfo endpoint alike. */
export function profileClaims(user: User, workspace?: Workspace & { role: Role }): ProfileClaims {
  return {
    name: user.name,
    ...(user.givenName ? { given_name: user.givenName } : {}),
    ...(user.familyName ? { family_name: user.familyName } : {}),
    email: user.email,
    ...(workspace ? { workspace: { id: workspace.id, name: workspace.name, role: workspace.role } } : {}),
  };
}

export const PROFILE_CLAIM_NAMES = ['name', 'given_name', 'family_name', 'email', 'workspace'] as const;
