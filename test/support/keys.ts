import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';

/** A fresh private signing key as a JWK (`alg`, `use` sig, `kid` its RFC 7638 thumbprint), as a JWKS_FILE or a foreign issuer holds one. */
export async function privateJwk(alg: 'ES256' | 'RS256'): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, alg, use: 'sig', kid: await calculateJwkThumbprint(jwk) };
}
