/**
 * How a user was authenticated, as ID tokens state it (OpenID Connect Core 2: `acr`, `amr`).
 * The only method is a password; no registered Level of Assurance name (RFC 6711) describes a
 * password alone, so the class is named under a URN of this product's own, and advertised in
 * discovery (`acr_values_supported`) so a client requesting it by `acr_values` gets it back.
 */
export const PASSWORD_ACR = 'urn:workspace-oauth-server:acr:password';

/** RFC 8176 authentication method reference: password. */
export const PASSWORD_AMR = ['pwd'];

export const ACR_VALUES = [PASSWORD_ACR];

/** What the engine's login prompt says of a request that insists on an authentication context class. */
interface LoginPrompt {
  reasons: readonly string[];
  details: { acr?: { value?: unknown; values?: unknown } } & Record<string, unknown>;
}

/**
 * Whether the request insists (`claims` `id_token.acr` essential) on authentication context
 * classes of which this server gives none: no sign-in can meet it, so the engine would ask for one
 * again after every sign-in. OpenID Connect Core 5.5.1.1 makes it a failed authentication instead.
 */
export function demandsUnofferedAcr(prompt: LoginPrompt): boolean {
  if (!prompt.reasons.includes('essential_acr') && !prompt.reasons.includes('essential_acrs')) return false;
  const { value, values } = prompt.details.acr ?? {};
  const asked: unknown[] = Array.isArray(values) ? values : [value];
  return !asked.some((acr) => typeof acr === 'string' && ACR_VALUES.includes(acr));
}
