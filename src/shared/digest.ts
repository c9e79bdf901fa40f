import { hash } from 'node:crypto';

/**
 * The SHA-256 of a bearer secret (a code, a refresh token, an API key...), base64url: what the
 * store keeps in its place, and what the cache of verified tokens is keyed by. Plain SHA-256
 * suffices: every such value is at least 128 random bits, so nothing can be guessed from its
 * digest.
 */
export function digest(value: string): string {
  return hash('sha256', value, 'base64url');
}
