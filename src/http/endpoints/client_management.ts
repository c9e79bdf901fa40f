import { text } from 'node:stream/consumers';

import type { Middleware } from 'koa';

import type { ModelStore } from '../../../adapters/store.ts';
import { isHashedSecret, secretMatches } from '../../clients/client_secrets.ts';
import { ENGINE_BODY_LIMIT } from '../../engine/body_limit.ts';
import { hideServerKeptMetadata, registrationBodyLimit } from './registration.ts';

/**
 * GET, PUT and DELETE /oauth/register/:clientId (RFC 7592 client management): what runs around
 * the engine's endpoints, in order.
 *
 * Before the engine:
 * 1. a body over the registration limit is refused before anything reads it (registration.ts);
 * 2. an update's `client_secret` is checked against the stored hash (checkSecretOnUpdate).
 * After the engine:
 * 3. the stored hash is never shown as if it were the secret (hideStoredSecret);
 * 4. nor what the server keeps about the client (registration.ts).
 */
export function clientManagementEndpoint(clients: ModelStore): Middleware[] {
  return [registrationBodyLimit, hideStoredSecret, hideServerKeptMetadata, checkSecretOnUpdate(clients)];
}

/**
 * RFC 7592 2.2 lets an update carry the client's current secret, which must match. The engine
 * compares it with the stored value as plaintext, so the host checks it against the hash first
 * and, when it matches, removes it; a wrong secret is left for the engine to refuse as before.
 * The body is parsed here and handed on (the engine reads an already parsed body).
 */
function checkSecretOnUpdate(clients: ModelStore): Middleware {
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
const hideStoredSecret: Middleware = async (ctx, next) => {
  await next();
  const body = ctx.body as Record<string, unknown> | undefined;
  if (body && typeof body === 'object' && isHashedSecret(body.client_secret)) {
    delete body.client_secret;
    delete body.client_secret_expires_at;
  }
};
