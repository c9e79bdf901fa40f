import { createHash } from 'node:crypto';

import { compactVerify, decodeJwt, decodeProtectedHeader, errors, type JWTPayload, type ProtectedHeaderParameters } from 'jose';

import type { ModuleContext } from '../context.ts';
import { idTokenIdentityClaims, standardClaimProblems, updatedAtProblem } from '../checks/standard_claims.ts';
import { keyResolver, stringList, type Provider } from './provider.ts';
import type { Client } from './registration.ts';

export interface IdToken {
  raw: string;
  header: ProtectedHeaderParameters;
  claims: JWTPayload;
}

/** The suite allows 5 minutes of clock skew in every time check. */
const SKEW_SECONDS = 300;

/** ExtractIdTokenFromTokenResponse: a JWT, or the module stops. */
export function parseIdToken(ctx: ModuleContext, raw: unknown): IdToken {
  ctx.require(typeof raw === 'string' && raw !== '', 'the token endpoint response has no id_token (OIDCC-3.1.3.3)');
  try {
    return { raw, header: decodeProtectedHeader(raw), claims: decodeJwt(raw) };
  } catch (error) {
    return ctx.fail(`the id_token is not a JWT: ${error instanceof Error ? error.message : String(error)}`);
  }
}

export interface IdTokenExpectations {
  /** The nonce sent, or undefined when none was (then the token must carry none). */
  nonce: string | undefined;
}

/**
 * PerformStandardIdTokenChecks: ValidateIdToken (iss, aud, exp, iat, auth_time, acr, nbf),
 * ValidateIdTokenStandardClaims, ValidateIdTokenNonce, ValidateIdTokenSignature against the
 * jwks_uri keys, CheckForSubjectInIdToken, EnsureIdTokenUpdatedAtValid; and the alg must be one
 * the discovery document lists in id_token_signing_alg_values_supported.
 */
export async function standardIdTokenChecks(ctx: ModuleContext, provider: Provider, client: Client, idToken: IdToken, expected: IdTokenExpectations): Promise<void> {
  const { claims } = idToken;
  checkIssuerAndAudience(ctx, provider, client, claims);
  checkTimes(ctx, claims);
  ctx.check(claims.acr === undefined || (typeof claims.acr === 'string' && claims.acr !== ''), 'id_token acr must be a non-empty string (OIDCC-5.5.1.1)');
  for (const problem of standardClaimProblems(idTokenIdentityClaims(claims))) ctx.check(false, `id_token claims are not valid: ${problem} (OIDCC-5.1)`);
  checkNonce(ctx, claims, expected.nonce);
  await checkSignature(ctx, provider, idToken);
  checkSubject(ctx, claims);
  const updatedAt = updatedAtProblem(claims, 'id_token');
  ctx.check(updatedAt === undefined, `${updatedAt} (OIDCC-5.1)`);
}

function checkIssuerAndAudience(ctx: ModuleContext, provider: Provider, client: Client, claims: JWTPayload): void {
  ctx.check(claims.iss === provider.metadata.issuer, `id_token iss ${JSON.stringify(claims.iss)} is not the issuer ${provider.metadata.issuer} (OIDCC-3.1.3.7)`);
  const audience = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  ctx.check(audience.includes(client.clientId), `id_token aud ${JSON.stringify(claims.aud)} does not contain the client_id ${client.clientId} (OIDCC-3.1.3.7)`);
}

function checkTimes(ctx: ModuleContext, claims: JWTPayload): void {
  const now = Date.now() / 1000;
  if (ctx.check(typeof claims.exp === 'number', "'exp' claim missing from the id_token")) {
    ctx.check(claims.exp! >= now - SKEW_SECONDS, `id_token expired (exp ${claims.exp})`);
    ctx.check(claims.exp! <= now + 50 * 365 * 86400, "'exp' is unreasonably far in the future (more than 50 years): milliseconds instead of seconds?");
  }
  if (ctx.check(typeof claims.iat === 'number', "'iat' claim missing from the id_token")) {
    ctx.check(claims.iat! <= now + SKEW_SECONDS, `id_token 'iat' ${claims.iat} is in the future`);
    ctx.check(claims.iat! >= now - SKEW_SECONDS, `id_token 'iat' ${claims.iat} is more than 5 minutes in the past`);
  }
  const authTime = claims.auth_time;
  if (authTime !== undefined) {
    ctx.check(typeof authTime === 'number', 'id_token auth_time is not a number');
    ctx.check(typeof authTime !== 'number' || authTime >= now - 365 * 86400, 'id_token auth_time is over a year in the past');
    ctx.check(typeof authTime !== 'number' || authTime <= now + SKEW_SECONDS, 'id_token auth_time is in the future');
  }
}

function checkNonce(ctx: ModuleContext, claims: JWTPayload, nonce: string | undefined): void {
  if (nonce === undefined) {
    ctx.check(claims.nonce === undefined, `the id_token has a nonce (${JSON.stringify(claims.nonce)}) although the request sent none (OIDCC-2)`);
    return;
  }
  ctx.check(claims.nonce === nonce, `Nonce values mismatch: id_token nonce ${JSON.stringify(claims.nonce)}, sent ${nonce} (OIDCC-2)`);
}

function checkSubject(ctx: ModuleContext, claims: JWTPayload): void {
  const { sub } = claims;
  if (!ctx.check(typeof sub === 'string' && sub !== '', "id_token does not contain 'sub' (OIDCC-2)")) return;
  ctx.check(sub!.length <= 255, "id_token 'sub' exceeds 255 ASCII characters");
  ctx.check(/^[\x20-\x7e]*$/.test(sub!), "id_token 'sub' contains non-printable or non-ASCII characters");
}

/** ValidateIdTokenSignature: verified with the key of the header's kid (or any matching key). */
async function checkSignature(ctx: ModuleContext, provider: Provider, idToken: IdToken): Promise<void> {
  const alg = idToken.header.alg;
  const advertised = stringList(provider.metadata, 'id_token_signing_alg_values_supported') ?? [];
  ctx.check(alg !== undefined && advertised.includes(alg), `the id_token is signed with ${alg}, not one of id_token_signing_alg_values_supported ${JSON.stringify(advertised)} (OIDCD-3)`);
  if (alg === undefined || alg === 'none') {
    ctx.check(false, `Error validating id_token signature: the id_token is unsigned (alg ${alg})`);
    return;
  }
  const problem = await signatureProblem(idToken.raw, provider);
  ctx.check(problem === undefined, `Unable to verify id_token signature based on server keys (kid ${idToken.header.kid}, alg ${alg}): ${problem}`);
}

/**
 * Why a JWS does not verify with the OP's keys, or undefined when it does. Without a kid, several
 * keys may fit the alg: like the suite, any one of them that verifies is enough.
 */
export async function signatureProblem(jws: string, provider: Provider): Promise<string | undefined> {
  try {
    await compactVerify(jws, keyResolver(provider));
    return undefined;
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) return error instanceof Error ? error.message : String(error);
    for await (const key of error as errors.JWKSMultipleMatchingKeys & AsyncIterable<CryptoKey>) {
      if (await compactVerify(jws, key).then(() => true, () => false)) return undefined;
    }
    return 'no key of the JWKS that fits the header verifies the signature';
  }
}

/** The left half of the hash the JWS alg names (OIDCC 3.1.3.6, 3.3.2.11), base64url. */
function leftHalfHash(alg: string, value: string): string | undefined {
  const size = /(256|384|512)$/.exec(alg === 'EdDSA' ? 'SHA512' : alg)?.[1];
  if (!size) return undefined;
  const digest = createHash(`sha${size}`).update(value, 'ascii').digest();
  return digest.subarray(0, digest.length / 2).toString('base64url');
}

/** ValidateAtHash / ValidateCHash, for a hash claim that is present. */
export function checkHashClaim(ctx: ModuleContext, idToken: IdToken, claim: 'at_hash' | 'c_hash', value: string): void {
  const actual = idToken.claims[claim];
  if (actual === undefined) return;
  const expected = leftHalfHash(idToken.header.alg ?? '', value);
  ctx.check(expected !== undefined && actual === expected, `Invalid ${claim} in the id_token: ${JSON.stringify(actual)}, expected ${expected} (OIDCC-3.3.2.11)`);
}
