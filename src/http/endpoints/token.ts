import { hash } from 'node:crypto';

import { calculateJwkThumbprint, decodeJwt, decodeProtectedHeader, type JWK } from 'jose';
import type { Context, Middleware } from 'koa';
import type { Provider } from 'oidc-provider';

import type { ProtectedResources } from '../../clients/protected_resources.ts';
import type { RefreshTokenRotations } from '../../engine/refresh_tokens.ts';
import { apiAudience, grantedDefault, proofRequired, unknownResource } from '../../engine/resource_indicators.ts';
import type { RateLimiting } from '../../rate_limits/limits.ts';
import { HttpError } from '../../shared/http_error.ts';
import { tokenRequestClientId, tokenRequestForm, type TokenRequestForm } from '../token_request_form.ts';
import { fapiClientsUseKeys } from './fapi_clients.ts';
import { rfc6749ErrorCodes } from './rfc6749_errors.ts';

export interface TokenEndpointDependencies {
  provider: Provider;
  /** Refresh token rotations, completed here once the answer is settled. */
  rotations: RefreshTokenRotations;
  rateLimits: RateLimiting;
  /** The APIs tokens are issued for. */
  resources: ProtectedResources;
}

/**
 * POST /oauth/token: what runs around the engine's token endpoint, in order.
 *
 * Before the engine:
 * 1. the rate limits: requests per client address, tokens issued per client (src/rate_limits/);
 * 2. a FAPI 2.0 client that does not authenticate with private_key_jwt (one stored before FAPI=on)
 *    is refused (fapi_clients.ts);
 * 3. a `resource` the server issues no tokens for, or one the code's or refresh token's grant does
 *    not include, is refused before the code or refresh token is used up; so is a request without
 *    a DPoP proof for an API that takes DPoP-bound tokens only;
 * 4. a code exchange with a DPoP proof of another key than the one the code is bound to, or one
 *    already used, is refused before the code is used up.
 * After the engine:
 * 5. a refresh token rotation is completed, now that the answer is settled, or given back when the
 *    answer is an error (src/engine/refresh_tokens.ts, RefreshTokenRotations.finish);
 * 6. RFC 6749 error codes where the engine's differ (rfc6749_errors.ts).
 */
export function tokenEndpoint({ provider, rotations, rateLimits, resources }: TokenEndpointDependencies): Middleware[] {
  return [
    rateLimits.token, fapiClientsUseKeys(provider), refuseTargetBeforeRedemption(provider, resources), refuseProofBeforeRedemption(provider),
    rfc6749ErrorCodes, completeRotation(rotations),
  ];
}

/** The last step after the engine: the rotation completed only for tokens about to be sent. */
function completeRotation(rotations: RefreshTokenRotations): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      await rotations.finish(ctx, false);
      throw error;
    }
    await rotations.finish(ctx, ctx.status === 200);
  };
}

/**
 * A token request's target is checked before the engine runs. The engine checks it only after it
 * has consumed the authorization code or rotated the refresh token, so a request it then refused
 * had used them up, and the client's retry with what it still holds was taken for a replay, which
 * revokes the whole grant. So these are refused here, untouched:
 * - a `resource` (RFC 8707) that is no API of this server, more than one, or (section 2.2) one that
 *   the code's or refresh token's grant was not given for;
 * - a request without a DPoP proof for an API that takes DPoP-bound tokens only (RFC 9449), named
 *   or, when none is named, the one the grant's token would be for.
 */
function refuseTargetBeforeRedemption(provider: Provider, resources: ProtectedResources): Middleware {
  const defaultResource = apiAudience(provider.issuer);
  return async (ctx, next) => {
    const form = await tokenRequestForm(ctx);
    const requested = form?.getAll('resource') ?? [];
    if (requested.length > 1) throw invalidTarget('one resource at most in a token request (RFC 8707 section 2)');
    const [named] = requested;
    const proofToCheck = !ctx.get('DPoP') && await resources.someRequireDpop();
    if (named === undefined && !proofToCheck) return next();
    const granted = form && await grantedResources(ctx, provider, form);
    if (named !== undefined) {
      if (!await resources.find(named)) throw invalidTarget(unknownResource(named));
      if (granted && !granted.includes(named)) {
        throw invalidTarget(`the grant does not include ${named.slice(0, 200)}; a token is issued only for the APIs the user allowed (RFC 8707 section 2.2)`);
      }
    }
    const target = named ?? (granted && grantedDefault(granted, defaultResource));
    const api = proofToCheck && target !== undefined ? await resources.find(target) : undefined;
    if (api?.dpopRequired) throw new HttpError(400, 'invalid_dpop_proof', proofRequired(api), { 'Access-Control-Allow-Origin': '*' });
    await next();
  };
}

/**
 * A code exchange's DPoP proof is checked before the engine for what the engine refuses only once
 * the code is used up (RFC 9449 section 10 and 11.1): a proof made with another key than the
 * `dpop_jkt` the authorization request bound the code to, or a proof already used. The client's
 * retry with the right proof then gets the tokens, rather than being taken for a replay of the code,
 * which revokes the grant. Only for a code this client may redeem: anything else, and the proof
 * itself (signature, method, URL, time, nonce), the engine answers, as before.
 */
function refuseProofBeforeRedemption(provider: Provider): Middleware {
  return async (ctx, next) => {
    const proof = ctx.get('DPoP') ? proofKeyAndId(ctx.get('DPoP')) : undefined;
    const form = proof && await tokenRequestForm(ctx);
    if (!form || form.get('grant_type') !== 'authorization_code') return next();
    const code = await redeemable(ctx, provider, form) as { clientId?: string; dpopJkt?: string } | undefined;
    const clientId = code && await tokenRequestClientId(ctx);
    if (!code || clientId === undefined || code.clientId !== clientId) return next();
    const thumbprint = code.dpopJkt === undefined ? undefined : await thumbprintOf(proof.jwk);
    if (thumbprint !== undefined && thumbprint !== code.dpopJkt) {
      throw invalidGrant('DPoP proof key thumbprint does not match dpop_jkt');
    }
    // Where the engine records a proof it took (ReplayDetection.unique), read without recording.
    if (await provider.ReplayDetection.find(hash('sha256', `${clientId}${proof.jti}`, 'base64url'))) {
      throw invalidGrant('DPoP proof JWT Replay detected');
    }
    await next();
  };
}

/** The key and id a DPoP proof names, unverified; undefined for one the engine refuses before any redemption. */
function proofKeyAndId(proof: string): { jwk: JWK; jti: string } | undefined {
  try {
    const { jwk } = decodeProtectedHeader(proof);
    const { jti } = decodeJwt(proof);
    return jwk && typeof jti === 'string' ? { jwk, jti } : undefined;
  } catch {
    return undefined;
  }
}

/** A proof key's RFC 7638 thumbprint; undefined for a key that has none (the engine refuses its proof). */
async function thumbprintOf(jwk: JWK): Promise<string | undefined> {
  return calculateJwkThumbprint(jwk).catch(() => undefined);
}

const REDEEMABLE = new WeakMap<Context, Promise<object | undefined>>();

/**
 * The code or refresh token the request redeems, as stored (read once per request); undefined
 * when it names none the store knows, or one already used: the engine answers those (a replay
 * revokes the grant, which a refusal here would spare).
 */
function redeemable(ctx: Context, provider: Provider, form: TokenRequestForm): Promise<object | undefined> {
  let found = REDEEMABLE.get(ctx);
  if (!found) {
    found = findUnused(provider, form);
    REDEEMABLE.set(ctx, found);
  }
  return found;
}

async function findUnused(provider: Provider, form: TokenRequestForm): Promise<object | undefined> {
  const grantType = form.get('grant_type');
  const value = grantType === 'refresh_token' ? form.get('refresh_token') : grantType === 'authorization_code' ? form.get('code') : null;
  if (!value) return undefined;
  const model = grantType === 'refresh_token'
    ? await provider.RefreshToken.find(value, { ignoreExpiration: true })
    : await provider.AuthorizationCode.find(value, { ignoreExpiration: true });
  // The engine's types name `consumed` on refresh tokens only; codes carry it too.
  return model && !(model as { consumed?: unknown }).consumed ? model : undefined;
}

/** The resources of the code or refresh token the request redeems; undefined as for redeemable. */
async function grantedResources(ctx: Context, provider: Provider, form: TokenRequestForm): Promise<string[] | undefined> {
  const model = await redeemable(ctx, provider, form);
  if (!model) return undefined;
  const { resource } = model as { resource?: string | string[] };
  return resource === undefined ? [] : typeof resource === 'string' ? [resource] : resource;
}

function invalidGrant(description: string): HttpError {
  return new HttpError(400, 'invalid_grant', description, { 'Access-Control-Allow-Origin': '*' });
}

function invalidTarget(description: string): HttpError {
  // Browser clients read the token endpoint's answers; the engine's own CORS never runs for this one.
  return new HttpError(400, 'invalid_target', description, { 'Access-Control-Allow-Origin': '*' });
}
