import { calculateJwkThumbprint, importJWK, SignJWT, type JWK } from 'jose';

/**
 * Signed userinfo responses (OpenID Connect Core 5.3.2): a client that registered
 * `userinfo_signed_response_alg` gets its userinfo claims as a JWT signed by the OP, with `iss`
 * and `aud`. The engine validates and keeps the setting (features.jwtUserinfo, restricted to the
 * algorithms the server's keys sign); the host's userinfo endpoint (src/http/endpoints/userinfo.ts)
 * asks for it and signs here.
 */

export interface UserinfoJwtOptions {
  /** The client's `userinfo_signed_response_alg`. */
  alg: string;
  /** The client the response is for (`aud`). */
  clientId: string;
  /** When the access token expires (seconds since the epoch): the response expires with it, as the engine's own. */
  expiresAt?: number;
}

/** The userinfo claims as a compact JWS. */
export type UserinfoSigner = (claims: Record<string, unknown>, options: UserinfoJwtOptions) => Promise<string>;

interface SigningKey {
  key: CryptoKey | Uint8Array;
  kid: string;
}

/** Signs with the server's private keys, choosing the key for an algorithm as the engine does for ID tokens, so `kid` names a key of the published JWKS. */
export function userinfoSigner(privateJwks: { keys: JWK[] }, issuer: string): UserinfoSigner {
  const keys = new Map<string, Promise<SigningKey>>();
  const keyFor = (alg: string): Promise<SigningKey> => {
    let key = keys.get(alg);
    if (!key) {
      key = importSigningKey(privateJwks.keys, alg);
      // A failure is not kept: the next request tries again and reports it again.
      key.catch(() => keys.delete(alg));
      keys.set(alg, key);
    }
    return key;
  };

  return async (claims, { alg, clientId, expiresAt }) => {
    const { key, kid } = await keyFor(alg);
    const jwt = new SignJWT(claims)
      .setProtectedHeader({ alg, kid })
      .setIssuer(issuer)
      .setAudience(clientId)
      .setIssuedAt();
    if (expiresAt !== undefined) jwt.setExpirationTime(expiresAt);
    return jwt.sign(key);
  };
}

async function importSigningKey(jwks: JWK[], alg: string): Promise<SigningKey> {
  const jwk = selectForSign(jwks, alg);
  if (!jwk) throw new Error(`no private key in the server's key material signs ${alg}`);
  // The engine names a key without `kid` by its RFC 7638 thumbprint too (initialize_keystore.js).
  const kid = jwk.kid ?? await calculateJwkThumbprint(jwk);
  return { key: await importJWK(jwk, alg), kid };
}

const EC_CURVES: Record<string, string | undefined> = { ES256: 'P-256', ES384: 'P-384', ES512: 'P-521' };

/**
 * The engine's KeyStore.selectForSign: the keys of the algorithm's type (and curve) that do not
 * say another algorithm, use or operation; those that say `alg` and `use` first, then in order.
 */
function selectForSign(jwks: JWK[], alg: string): JWK | undefined {
  const kty = alg.startsWith('RS') || alg.startsWith('PS') ? 'RSA' : alg.startsWith('ES') ? 'EC' : undefined;
  const crv = EC_CURVES[alg];
  const score = (jwk: JWK) => (jwk.alg ? 1 : 0) + (jwk.use ? 1 : 0);
  return jwks
    .filter((jwk) => jwk.kty === kty
      && jwk.d !== undefined
      && (jwk.alg === undefined || jwk.alg === alg)
      && (jwk.use === undefined || jwk.use === 'sig')
      && (crv === undefined || jwk.crv === crv)
      && (!Array.isArray(jwk.key_ops) || jwk.key_ops.includes('sign')))
    .sort((first, second) => score(second) - score(first))[0];
}
