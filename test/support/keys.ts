import { randomUUID } from 'node:crypto';

import { calculateJwkThumbprint, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';

/** A fresh private signing key as a JWK (`alg`, `use` sig, `kid` its RFC 7638 thumbprint), as a JWKS_FILE or a foreign issuer holds one. */
export async function privateJwk(alg: 'ES256' | 'RS256'): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, alg, use: 'sig', kid: await calculateJwkThumbprint(jwk) };
}

/** A client's signing key: the private key it signs with, and the public JWK it registers (`alg`, `use` sig, a random `kid`). */
export interface ClientKey {
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function clientKey(alg = 'ES256'): Promise<ClientKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, publicJwk: { ...await exportJWK(publicKey), alg, use: 'sig', kid: randomUUID() } };
}
