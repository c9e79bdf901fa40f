import { randomBytes } from 'node:crypto';

import type { Middleware } from 'koa';

import type { ModelStore } from '../../../adapters/store.ts';
import { isHashedSecret, secretMatches } from '../../clients/client_secrets.ts';
import { releaseRegistrationTokenClaim } from '../../engine/registration_token_claims.ts';
import { REGISTRATION_BODY_MAX } from '../../clients/registration_hygiene.ts';
import { bearerCors } from '../../resource/cors.ts';
import { HttpError } from '../../shared/http_error.ts';
import { peekBody, replaceBody } from '../request_body.ts';
import { refuseTokenInQuery } from './token_in_query.ts';
import { hideServerKeptMetadata, registrationBodyTyped, registrationBodyLimit, registrationTooLarge } from './registration.ts';

/**
 * GET, PUT and DELETE /oauth/register/:clientId (RFC 7592 client management): what runs around
 * the engine's endpoints, in order.
 *
 * Before the engine:
 * 1. CORS: a browser-based client that registered from its page manages its registration from
 *    there too (the credential is the registration access token, never a cookie); the token in
 *    the URL is refused with its challenge (token_in_query.ts);
 * 2. a body over the registration limit is refused before anything reads it, and one without a
 *    Content-Type for that (registration.ts);
 * 3. an update's `client_secret` is checked against the stored hash (checkSecretOnUpdate).
 * In the engine, an update or delete claims its registration access token before it writes the
 * client (src/engine/registration_token_claims.ts).
 * After the engine:
 * 4. the claim is given back (giveBackTokenClaim);
 * 5. the stored hash is never shown as if it were the secret (hideStoredSecret);
 * 6. nor what the server keeps about the client (registration.ts).
 */
export function clientManagementEndpoint(clients: ModelStore, registrationAccessTokens: ModelStore): Middleware[] {
  return [bearerCors('GET, PUT, DELETE'), refuseTokenInQuery, registrationBodyLimit, registrationBodyTyped, hideStoredSecret, hideServerKeptMetadata, giveBackTokenClaim(registrationAccessTokens), checkSecretOnUpdate(clients)];
}

/** Once answered, the registration access token's claim is given back: only a failed request's token is still there to take it. */
function giveBackTokenClaim(registrationAccessTokens: ModelStore): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } finally {
      await releaseRegistrationTokenClaim(registrationAccessTokens, ctx);
    }
  };
}

/**
 * RFC 7592 2.2 lets an update carry the client's current secret, which must match. The engine
 * compares it with the stored value as plaintext, which is a hash here (it would take the stored
 * hash for the secret). So the host checks it against the hash first: a match is removed; anything
 * else is replaced by a value no stored secret can equal, for the engine to refuse once it has
 * checked the registration access token. Refusing it here, before that check, would tell anyone
 * without the token whether a guess is the secret. The body is read here, within the registration
 * limit whether or not it declares its length, and put back, changed where the secret was, for the
 * engine to read from the request as it reads every body.
 */
function checkSecretOnUpdate(clients: ModelStore): Middleware {
  return async (ctx, next) => {
    if (ctx.method !== 'PUT' || !ctx.is('application/json')) return next();
    const raw = await peekBody(ctx.req, ctx.request.length, REGISTRATION_BODY_MAX);
    if (raw === undefined) return next();
    if (raw.length > REGISTRATION_BODY_MAX) throw await registrationTooLarge(ctx.req);
    const body = jsonObject(raw, ctx.request.charset);
    if (!body) throw new HttpError(400, 'invalid_request', 'the request body could not be read as a JSON object');
    if ('client_secret' in body) {
      const stored = await clients.find(String(ctx.params.clientId));
      const matches = typeof body.client_secret === 'string' && secretMatches(stored?.client_secret, body.client_secret);
      if (matches) delete body.client_secret;
      else body.client_secret = randomBytes(32).toString('base64url');
      replaceBody(ctx.req, Buffer.from(JSON.stringify(body)), 'application/json');
    }
    await next();
  };
}

/** The body as a JSON object, read in its declared charset as the engine reads it; undefined for anything else. */
function jsonObject(raw: Buffer, charset: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(new TextDecoder(charset || 'utf-8').decode(raw));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? value as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}

/**
 * RFC 7592 read and update responses must not show the stored hash as if it were the secret. When
 * the secret expires (`client_secret_expires_at`) is still said: the client holds the secret.
 */
const hideStoredSecret: Middleware = async (ctx, next) => {
  await next();
  const body = ctx.body as Record<string, unknown> | undefined;
  if (body && typeof body === 'object' && isHashedSecret(body.client_secret)) delete body.client_secret;
};
