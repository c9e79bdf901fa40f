import { createHash, timingSafeEqual } from 'node:crypto';

import type { Provider } from 'oidc-provider';
import type { Middleware } from 'koa';

import type { ModelPayload } from '../../adapters/store.ts';

/**
 * Client secrets are kept only as SHA-256 hashes (RFC 6819 5.1.4.1.3): the plaintext is shown once,
 * in the registration response, and can never be read back. The secrets are 512 random bits, so a
 * fast hash is enough; no salt or stretching is needed against guessing.
 */
const PREFIX = '$sha256$';

export function hashClientSecret(secret: string): string {
  return `${PREFIX}${createHash('sha256').update(secret).digest('base64url')}`;
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
    const stored = this.clientSecret;
    if (!isHashedSecret(stored)) return false;
    const expected = Buffer.from(stored);
    const presented = Buffer.from(hashClientSecret(actual));
    return expected.length === presented.length && timingSafeEqual(expected, presented);
  };
}

/** RFC 7592 read and update responses must not show the stored hash as if it were the secret. */
export const hideStoredSecret: Middleware = async (ctx, next) => {
  await next();
  const body = ctx.body as Record<string, unknown> | undefined;
  if (body && typeof body === 'object' && isHashedSecret(body.client_secret)) {
    delete body.client_secret;
    delete body.client_secret_expires_at;
  }
};
