import { performance } from 'node:perf_hooks';

import { CompactSign, compactVerify, generateKeyPair } from 'jose';

/**
 * The machine's raw ES256 speed with jose, one operation at a time (one core): every JWT access
 * token costs one signature, so this is the ceiling no token endpoint here can beat.
 */
export interface CryptoLimits {
  es256SignPerSecond: number;
  es256VerifyPerSecond: number;
}

export async function measureCryptoLimits(seconds = 2): Promise<CryptoLimits> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  // About the size of an access token's claims.
  const payload = new TextEncoder().encode(JSON.stringify({
    iss: 'http://127.0.0.1:3000', sub: 'usr_0123456789abcdef', aud: 'http://127.0.0.1:3000/rest',
    iat: 1_700_000_000, exp: 1_700_003_600, jti: 'x'.repeat(43), client_id: 'cl_'.padEnd(35, 'x'), scope: 'api profile',
  }));
  const sign = () => new CompactSign(payload).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt' }).sign(privateKey);
  const jws = await sign();
  return {
    es256SignPerSecond: await rate(seconds, sign),
    es256VerifyPerSecond: await rate(seconds, () => compactVerify(jws, publicKey)),
  };
}

async function rate(seconds: number, operation: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 200; i += 1) await operation();
  let count = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  while (performance.now() < until) {
    await operation();
    count += 1;
  }
  return count / ((performance.now() - started) / 1000);
}
