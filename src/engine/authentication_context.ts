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
