import { hash, timingSafeEqual } from 'node:crypto';

import type { Provider } from 'oidc-provider';

import type { ModelPayload } from '../../adapters/store.ts';

/**
 * Client secrets are kept only as SHA-256 hashes (RFC 6819 5.1.4.1.3): the plaintext is shown once,
 * in the registration response, and can never be read back. The secrets are 512 random bits, so a
 * fast hash is enough; no salt or stretching is needed against guessing.
 */
const PREFIX = '$sha256$';

export function hashClientSecret(secret: string): string {
  return `${PREFIX}${hash('sha256', secret, 'base64url')}`;
}

export function isHashedSecret(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(PREFIX);
}

/** Replaces a plaintext `client_secret` in a client record about to be stored. */
export function withHashedSecret(payload: ModelPayload): ModelPayload {
  const secret = payload.client_secret;
  if (typeof secret !== 'string' || isHashedSecret(secret)) return payload;
  return { ...payload, client_secret: hashClientSecret(secret) };
}

/**
 * Teaches the engine's Client model to check a presented secret against the stored hash
 * (the engine exposes `compareClientSecret` for exactly this).
 */
export function useHashedClientSecrets(provider: Provider): void {
  provider.Client.prototype.compareClientSecret = function compareClientSecret(this: { clientSecret?: string }, actual: string) {
    return secretMatches(this.clientSecret, actual);
  };
}

export function secretMatches(stored: unknown, presented: string): boolean {
  if (!isHashedSecret(stored)) return false;
  const expected = Buffer.from(stored);
  const actual = Buffer.from(hashClientSecret(presented));
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}
