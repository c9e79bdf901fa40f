import { hash, timingSafeEqual } from 'node:crypto';
import { text } from 'node:stream/consumers';

import type { Provider } from 'oidc-provider';
import type { Middleware } from 'koa';

import type { ModelPayload, ModelStore } from '../../adapters/store.ts';
import { ENGINE_BODY_LIMIT } from '../engine/body_limit.ts';

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

function secretMatches(stored: unknown, presented: string): boolean {
  if (!isHashedSecret(stored)) return false;
  const expected = Buffer.from(stored);
  const actual = Buffer.from(hashClientSecret(presented));
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/**
 * RFC 7592 2.2 lets an update carry the client's current secret, which must match. The engine
 * compares it with the stored value as plaintext, so the host checks it against the hash first
 * and, when it matches, removes it; a wrong secret is left for the engine to refuse as before.
 * The body is parsed here and handed on (the engine reads an already parsed body).
 */
export function checkSecretOnUpdate(clients: ModelStore): Middleware {
  return async (ctx, next) => {
    const length = ctx.request.length;
    if (ctx.method !== 'PUT' || !ctx.is('application/json') || length === undefined || length > ENGINE_BODY_LIMIT) return next();
    const raw = await text(ctx.req);
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      body = raw; // the engine answers the parse error
    }
    const presented = (body as { client_secret?: unknown } | null)?.client_secret;
    if (typeof presented === 'string') {
      const stored = await clients.find(String(ctx.params.clientId));
      if (secretMatches(stored?.client_secret, presented)) delete (body as { client_secret?: unknown }).client_secret;
    }
    ctx.request.body = body;
    await next();
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
