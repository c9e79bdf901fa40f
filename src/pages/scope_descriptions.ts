/** What the consent page and the settings area's connected applications say an application may do. */

/** The consent screen's plain-language description of each scope. */
export const SCOPE_DESCRIPTIONS: Record<string, string> = {
  openid: 'Confirm who you are',
  // A viewer's tokens only read: what the application can do is what the user's role allows.
  api: 'Read the workspace’s records and metadata, and change them if your role there allows (Core and Metadata APIs)',
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
