import { createHash, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto';

/**
 * DPoP proofs (RFC 9449) for the load generator, made synchronously so each request gets its own
 * (a proof is used once): ES256 with node:crypto, as a client library would sign them.
 */
export class ProofMaker {
  readonly #privateKey: KeyObject;
  readonly #header: string;

  constructor() {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.#privateKey = privateKey;
    const { kty, crv, x, y } = publicKey.export({ format: 'jwk' });
    this.#header = encode({ typ: 'dpop+jwt', alg: 'ES256', jwk: { kty, crv, x, y } });
  }

  /** A proof for one request; with `accessToken`, for a request to an API (`ath`). */
  proof(method: string, url: string, accessToken?: string): string {
    const claims = {
      jti: randomUUID(), htm: method, htu: url, iat: Math.floor(Date.now() / 1000),
      ...(accessToken ? { ath: createHash('sha256').update(accessToken).digest('base64url') } : {}),
    };
    const input = `${this.#header}.${encode(claims)}`;
    const signature = sign('sha256', Buffer.from(input), { key: this.#privateKey, dsaEncoding: 'ieee-p1363' });
    return `${input}.${signature.toString('base64url')}`;
  }
}

function encode(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}
