import { importJWK, type JSONWebKeySet, type JWK } from 'jose';

import type { ModuleContext } from '../context.ts';

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const REQUIRED_MEMBERS: Record<string, string[]> = { RSA: ['n', 'e'], EC: ['crv', 'x', 'y'], OKP: ['crv', 'x'] };

/**
 * The server JWKS checks every module makes in configure() (ValidateJwksSequence,
 * CheckForKeyIdInServerJWKs, CheckDistinctKeyIdValueInServerJWKs), and the discovery module too.
 */
export async function checkServerJwks(ctx: ModuleContext, jwks: JSONWebKeySet, options: { requireKids: boolean }): Promise<void> {
  if (!ctx.check(Array.isArray(jwks.keys), "The JWK set in server JWKS does not contain a 'keys' array")) return;
  const kids = new Set<string>();
  for (const [index, key] of jwks.keys.entries()) {
    const present = PRIVATE_MEMBERS.filter((member) => member in key);
    ctx.check(present.length === 0, `The JWK set in server JWKS contains private or symmetric key material (key ${index}: ${present.join(', ')}); a published JWK set must contain public keys only`);
    const missing = (REQUIRED_MEMBERS[key.kty ?? ''] ?? []).filter((member) => typeof (key as Record<string, unknown>)[member] !== 'string');
    ctx.check(typeof key.kty === 'string' && missing.length === 0, `The JWK set in server JWKS is structurally invalid: key ${index} ${key.kty ? `lacks ${missing.join(', ')}` : 'has no kty'}`);
    if (present.length === 0 && missing.length === 0) await checkUsable(ctx, key, index);
    if (options.requireKids) ctx.check(typeof key.kid === 'string' && key.kid.trim() !== '', `kid not found in key ${index} of the server JWKS (OIDCC-10.1)`);
    if (typeof key.kid === 'string') {
      ctx.check(!kids.has(key.kid), `'kid' value ${key.kid} is used more than once in server_jwks (RFC7517-4.5)`);
      kids.add(key.kid);
    }
  }
}

async function checkUsable(ctx: ModuleContext, key: JWK, index: number): Promise<void> {
  try {
    await importJWK(key, key.alg ?? defaultAlg(key));
  } catch (error) {
    ctx.warn(false, `server JWKS key ${index} cannot be used (${error instanceof Error ? error.message : String(error)})`);
  }
}

function defaultAlg(key: JWK): string {
  if (key.kty === 'RSA') return 'RS256';
  if (key.kty === 'OKP') return 'EdDSA';
  return ({ 'P-256': 'ES256', 'P-384': 'ES384', 'P-521': 'ES512' } as Record<string, string>)[key.crv ?? ''] ?? 'ES256';
}
