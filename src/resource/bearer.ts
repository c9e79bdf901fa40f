import type { Context } from 'koa';

import { inErrorDescriptionCharset } from '../shared/error_description.ts';
import { HttpError } from '../shared/http_error.ts';
import { isRepeatedHeader } from '../shared/repeated_headers.ts';
import { isFor, type AccessTokenClaims } from '../tokens/verifier.ts';

/** How an access token is sent: as a bearer token (RFC 6750), or bound to a key and sent with a proof (RFC 9449). */
export type Scheme = 'Bearer' | 'DPoP';

export interface AccessCredential {
  scheme: Scheme;
  token: string;
}

/** One token after its scheme, in the syntax of RFC 6750 section 2.1 (`b64token`). */
const CREDENTIAL = /^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*)$/i;

/** A header that names one of the schemes, whatever follows. */
const NAMES_SCHEME = /^(Bearer|DPoP)(\s|$)/i;

/** The credential of an `Authorization: Bearer <token>` (RFC 6750 section 2.1) or `Authorization: DPoP <token>` (RFC 9449 section 7.1) header, if there is one. */
export function accessCredential(ctx: Context): AccessCredential | undefined {
  const match = CREDENTIAL.exec(ctx.get('authorization'));
  if (!match || isRepeatedHeader(ctx.req, 'authorization')) return undefined;
  return { scheme: match[1]!.toLowerCase() === 'dpop' ? 'DPoP' : 'Bearer', token: match[2]! };
}

/**
 * A request without a credential, refused: RFC 6750 section 3.1. A header that names Bearer or
 * DPoP but does not carry one token as section 2.1 writes it (`Bearer`, `Bearer a b`,
 * `Bearer tok!en`) is a malformed request, 400 `invalid_request`; any other (none, or another
 * scheme) is a request that lacks authentication, 401 with no error code, naming the `scope` a
 * token needs when the API says (section 3; what MCP clients ask for first).
 */
export function missingCredential(ctx: Context, needed: { description: string; scope?: string }): CredentialRefusal {
  if (isRepeatedHeader(ctx.req, 'authorization')) return { status: 400, error: 'invalid_request', description: ONE_AUTHORIZATION_HEADER };
  if (!NAMES_SCHEME.test(ctx.get('authorization'))) return { status: 401, ...needed };
  return { status: 400, error: 'invalid_request', description: 'the Authorization header is malformed: send one access token after its scheme, as Authorization: Bearer <token> (RFC 6750 section 2.1)' };
}

/** Said of a request with two Authorization headers, at every endpoint that reads one. */
export const ONE_AUTHORIZATION_HEADER = 'send one Authorization header: it holds one credential, and a request with two is refused (RFC 9110 section 5.3)';

/** What refusing a request for its credential says, before the API adds its challenge's own parts. */
export type CredentialRefusal = Omit<Refusal, 'realm' | 'resourceMetadata' | 'dpop'>;

/**
 * The credential of the header or, for a form-encoded POST, of its `access_token` parameter (RFC
 * 6750 section 2.2, a bearer token); the form must have been parsed into `ctx.request.body`. The
 * query string (section 2.3) is not read: tokens in URLs end up in logs. Else the refusal: none
 * (missingCredential), or one in both places or the parameter repeated, a request that uses more
 * than one method or repeats a parameter (section 3.1, 400 `invalid_request`).
 */
export function headerOrFormCredential(ctx: Context, needed: { description: string }): AccessCredential | CredentialRefusal {
  const header = accessCredential(ctx);
  const body = ctx.request.body as Record<string, unknown> | undefined;
  const form = ctx.method === 'POST' && ctx.is('application/x-www-form-urlencoded') ? body?.access_token : undefined;
  if (form === undefined) return header ?? missingCredential(ctx, needed);
  if (header !== undefined || ctx.get('authorization')) {
    return { status: 400, error: 'invalid_request', description: 'send the access token once: in the Authorization header or in the form body, not both' };
  }
  if (Array.isArray(form)) return { status: 400, error: 'invalid_request', description: 'send the access_token parameter once' };
  return typeof form === 'string' && form !== '' ? { scheme: 'Bearer', token: form } : missingCredential(ctx, needed);
}

/**
 * A token verified for any API (`verified`, from AccessTokenVerifier.verify without an audience)
 * as the API `audience` takes it: its claims when it is for that API; else why it is refused, and
 * whether it is a good token this server issued for another API. One of those is a client that
 * asked for the wrong `resource` (or none): told so, and how to ask, rather than that its token is
 * invalid (its holder can read its `aud` anyway). `here` names what refuses.
 */
export function takenToken(verified: AccessTokenClaims | undefined, audience: string, here: string): { claims: AccessTokenClaims } | UntakenToken {
  if (!verified) return { description: 'the access token is invalid, expired or revoked', forAnotherApi: false };
  if (isFor(verified, audience)) return { claims: verified };
  const issuedFor = Array.isArray(verified.aud) ? verified.aud : [verified.aud ?? ''];
  return {
    description: `the access token was issued for ${issuedFor.join(' ').slice(0, 200)}; ${here} takes tokens issued for ${audience}: ask for one with resource=${audience} (RFC 8707)`,
    forAnotherApi: true,
  };
}

/** Why an access token was not taken: `forAnotherApi` when it is a good token this server issued for another API. */
export interface UntakenToken {
  description: string;
  forAnotherApi: boolean;
}

/** What an API that takes DPoP-bound tokens says in its challenges (RFC 9449 section 7.1). */
export interface DpopChallenge {
  /** The algorithms a proof may be signed with (`algs`). */
  algorithms: readonly string[];
  /** It also takes bearer tokens: both challenges are sent. */
  bearerAccepted: boolean;
}

export interface Refusal {
  /** 400 for a malformed request, 401 for a missing or bad credential, 403 for one lacking a scope (RFC 6750 section 3.1). */
  status: 400 | 401 | 403;
  /** None when the request carried no credential: RFC 6750 section 3.1 asks for no error code then. */
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope' | 'invalid_dpop_proof' | 'use_dpop_nonce';
  description?: string;
  /** The scope the request needs: with insufficient_scope, or to a request without a credential. */
  scope?: string;
  realm?: string;
  /** Where the protected resource's metadata is (RFC 9728 section 5.1). */
  resourceMetadata?: string;
  dpop?: DpopChallenge;
  /** The challenge the error belongs to: DPoP for a bound token or its proof; else Bearer where it is accepted. */
  errorScheme?: Scheme;
  /** A fresh nonce for the client's next proof (`DPoP-Nonce`, with use_dpop_nonce). */
  nonce?: string;
}

/**
 * The refusal as RFC 6750 and RFC 9449 say it: a challenge per scheme the API takes in
 * `WWW-Authenticate`, the error in the challenge of the scheme it concerns and in the body.
 */
export function refusalOf(refusal: Refusal): HttpError {
  const common: string[] = [];
  if (refusal.realm) common.push(`realm="${refusal.realm}"`);
  if (refusal.resourceMetadata) common.push(`resource_metadata="${refusal.resourceMetadata}"`);
  const errorParams: string[] = [];
  if (refusal.error) errorParams.push(`error="${refusal.error}"`);
  if (refusal.error && refusal.description) errorParams.push(`error_description="${inErrorDescriptionCharset(refusal.description)}"`);
  if (refusal.scope) errorParams.push(`scope="${refusal.scope}"`);

  const bearerAccepted = !refusal.dpop || refusal.dpop.bearerAccepted;
  const errorScheme = refusal.errorScheme ?? (bearerAccepted ? 'Bearer' : 'DPoP');
  const challenges: string[] = [];
  if (bearerAccepted) challenges.push(challenge('Bearer', [...common, ...(errorScheme === 'Bearer' ? errorParams : [])]));
  if (refusal.dpop) challenges.push(challenge('DPoP', [...common, `algs="${refusal.dpop.algorithms.join(' ')}"`, ...(errorScheme === 'DPoP' ? errorParams : [])]));
  return new HttpError(refusal.status, refusal.error ?? 'invalid_request', refusal.description ?? 'an access token is required', {
    'WWW-Authenticate': challenges.join(', '),
    ...(refusal.nonce ? { 'DPoP-Nonce': refusal.nonce } : {}),
  });
}

function challenge(scheme: Scheme, params: string[]): string {
  return params.length ? `${scheme} ${params.join(', ')}` : scheme;
}
