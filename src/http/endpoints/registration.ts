import type { IncomingMessage } from 'node:http';

import type { Middleware } from 'koa';
import type { Provider } from 'oidc-provider';

import type { Accounts } from '../../accounts/accounts.ts';
import { findInitialAccessToken } from '../../clients/initial_access_tokens.ts';
import { REDIRECT_URIS_ADDED_METADATA, UNUSED_UNTIL_METADATA } from '../../clients/registration.ts';
import { REGISTRATION_BODY_MAX } from '../../clients/registration_hygiene.ts';
import type { RateLimiting } from '../../rate_limits/limits.ts';
import { bearerCors } from '../../resource/cors.ts';
import { HttpError } from '../../shared/http_error.ts';
import { undoRegistrationWrites } from '../../engine/registration_writes.ts';
import { discardBody, peekBody, typedBody } from '../request_body.ts';
import { refuseTokenInQuery } from './token_in_query.ts';

export interface RegistrationEndpointDependencies {
  provider: Provider;
  accounts: Accounts;
  rateLimits: RateLimiting;
}

/**
 * POST /oauth/register (RFC 7591): what runs around the engine's registration endpoint, in order.
 * The engine checks the metadata through the product's rules (src/clients/registration.ts).
 *
 * Before the engine:
 * 1. CORS: browser-based clients (MCP hosts running in a page) register from another origin;
 *    an initial access token in the URL is refused (token_in_query.ts);
 * 2. a body over REGISTRATION_BODY_MAX is refused before anything parses it, and one sent without
 *    a Content-Type (which the engine would read as no body) is refused for that;
 * 3. the rate limit: registrations per client address (src/rate_limits/);
 * 4. an initial access token, when one is presented, must be live and its workspace still exist:
 *    the workspace binds the client (and, for a token made with `--fapi`, makes it a FAPI 2.0
 *    client), and the registration uses the token up once the client is stored.
 * After the engine:
 * 5. a registration that did not succeed leaves nothing stored: what it stored (a client, its
 *    registration access token) is removed (src/engine/registration_writes.ts);
 * 6. the response shows the client's metadata, not what the server keeps about it.
 */
export function registrationEndpoint({ provider, accounts, rateLimits }: RegistrationEndpointDependencies): { preflight: Middleware; post: Middleware[] } {
  const cors = bearerCors('POST');
  return {
    preflight: cors,
    post: [cors, refuseTokenInQuery, registrationBodyLimit, registrationBodyTyped, rateLimits.registration, hideServerKeptMetadata, undoFailedRegistration(provider), registrationWorkspace(provider, accounts)],
  };
}

/** Registration and RFC 7592 update bodies are JSON. */
export const registrationBodyTyped = typedBody('application/json');

/**
 * Refuses an oversized registration body (413, RFC 7591 error shape): one declared larger before
 * anything reads it, one sent without a length (chunked) once more than the limit has come; the
 * engine's own reader would stop only at 56 KiB. A body within the limit is put back for the
 * engine to read.
 */
export const registrationBodyLimit: Middleware = async (ctx, next) => {
  const declared = ctx.request.length;
  if ((declared ?? 0) > REGISTRATION_BODY_MAX) throw await registrationTooLarge(ctx.req);
  const chunked = declared === undefined && ctx.get('Transfer-Encoding') !== '';
  if (chunked && ((await peekBody(ctx.req, undefined, REGISTRATION_BODY_MAX))?.length ?? 0) > REGISTRATION_BODY_MAX) {
    throw await registrationTooLarge(ctx.req);
  }
  await next();
};

/** How much of an oversized registration body is read (and dropped) so that its client sees the 413. */
const OVERSIZED_BODY_DRAINED = 1024 * 1024;

/**
 * The refusal of a registration or update body over the limit. The rest of the body is read and
 * dropped, up to OVERSIZED_BODY_DRAINED, so that a client still sending it reads the answer; past
 * that, or for a body declared larger, the answer closes the connection without reading more.
 */
export async function registrationTooLarge(req: IncomingMessage): Promise<HttpError> {
  const declared = Number(req.headers['content-length'] ?? 0);
  const drained = declared <= OVERSIZED_BODY_DRAINED && await discardBody(req, OVERSIZED_BODY_DRAINED);
  return new HttpError(413, 'invalid_request', `the registration request is larger than ${REGISTRATION_BODY_MAX / 1024} KiB`, drained ? {} : { Connection: 'close' });
}

/** A registration answered with anything but 201 removes what it stored. */
function undoFailedRegistration(provider: Provider): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } finally {
      if (ctx.status !== 201) await undoRegistrationWrites(provider, ctx);
    }
  };
}

/** Registration and RFC 7592 read and update responses show the client's metadata, not what the server keeps about it. */
export const hideServerKeptMetadata: Middleware = async (ctx, next) => {
  await next();
  const body = ctx.body as Record<string, unknown> | undefined;
  if (body && typeof body === 'object') {
    delete body[REDIRECT_URIS_ADDED_METADATA];
    delete body[UNUSED_UNTIL_METADATA];
  }
};

/**
 * Resolves the workspace of a registration request's initial access token (if it sent one),
 * before the engine handles the request, and marks the registration as one that uses the token
 * (counted when the client is stored: src/clients/initial_access_tokens.ts). With open
 * registration the token is optional but, when present, must be valid: a bad, expired or used-up
 * one is refused rather than silently ignored. So is one whose workspace was deleted (`workspace
 * delete` deletes the workspace's tokens; one made before they were listed by workspace is not).
 */
function registrationWorkspace(provider: Provider, accounts: Accounts): Middleware {
  return async (ctx, next) => {
    const header = ctx.get('authorization');
    const token = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec(header)?.[1];
    // A header that is there but names no bearer token is malformed (RFC 6750 section 3.1), not absent.
    if (header && !token) throw new HttpError(400, 'invalid_request', 'the Authorization header must be Bearer followed by the initial access token');
    if (token) {
      const iat = await findInitialAccessToken(provider, token);
      if (!iat || (iat.workspace !== undefined && !await accounts.getWorkspace(iat.workspace))) {
        const description = 'initial access token is invalid, expired or used up';
        throw new HttpError(401, 'invalid_token', description, { 'WWW-Authenticate': `Bearer error="invalid_token", error_description="${description}"` });
      }
      if (iat.workspace) ctx.state.registrationWorkspace = iat.workspace;
      if (iat.fapi) ctx.state.registrationFapi = true;
      ctx.state.initialAccessTokenUse = iat;
    }
    await next();
  };
}
