import { randomUUID } from 'node:crypto';

import type { ModuleContext } from '../context.ts';
import { dpopProof, newKeyPair, type ProofOptions } from '../client/fapi2_client.ts';
import { acceptTokens, callResource, fapiCode, fapiRequest, fapiSetUp, redeem } from '../flows/fapi2_flow.ts';
import type { ConformanceModule } from '../module.ts';

const now = () => Math.floor(Date.now() / 1000);

export const fapi2DpopProofNbfExp: ConformanceModule = {
  name: 'fapi2-security-profile-final-check-dpop-proof-nbf-exp',
  summary: 'DPoP proofs that also carry nbf and exp (within their validity): accepted at the token endpoint and the resource',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const code = await fapiCode(ctx, session, request);
    const claims = () => ({ nbf: now() - 5, exp: now() + 60 });
    const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request, { proof: { claims: claims() } }), request);
    await callResource(ctx, session, tokens);
  },
};

/** One case of FAPI2SPFinalDpopNegativeTests: how the request differs, and what the suite expects. */
interface NegativeCase {
  what: string;
  /** The DPoP header values to send (none: no proof), made for the nonce the server asked for, if any. */
  proofs: (nonce: string | undefined) => Promise<string[]>;
  scheme?: string;
  /** The suite's expectSuccess: 200 expected, else 400 or 401. */
  succeeds: boolean;
  /** The suite's shouldFail: a wrong answer is a failure, else a warning. */
  graded: boolean;
  /** iat cases: when the server asks for a nonce, the proof with the nonce must be accepted (a warning otherwise). */
  nonceRelaxes?: boolean;
}

const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A proof's header segment replaced (the signature then no longer matches it). */
function withHeader(jws: string, header: Record<string, unknown>): string {
  const [, payload, signature] = jws.split('.');
  return `${part(header)}.${payload}.${signature}`;
}

/**
 * FAPI2SPFinalDpopNegativeTests: the protected resource with the DPoP-bound token and, case by
 * case, a proof the RFC allows (which must be accepted) or one it forbids (which must be refused
 * with 400 or 401), graded as the suite grades each. Its case of the header named in capitals is
 * left out: HTTP header names are case-insensitive, and fetch sends them in lower case.
 */
export const fapi2DpopNegative: ConformanceModule = {
  name: 'fapi2-security-profile-final-dpop-negative-tests',
  summary: 'the resource with proofs the RFC allows (a query in htu, extra claims, htu in upper case) and those it forbids (two proofs, malformed, no typ, alg, jwk, jti, htm, htu, iat or ath, a wrong typ, RS256, none, a bad signature, a private jwk, a wrong htm, htu or ath, an hour off, a replayed jti, another key, no proof)',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const code = await fapiCode(ctx, session, request);
    const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
    // The resource must take a sound proof first (else the module says it cannot go on).
    await callResource(ctx, session, tokens);
    const url = session.provider.metadata.userinfo_endpoint as string;
    const key = session.client.dpopKey;
    const { kid: _kid, use: _use, ...jwk } = key.publicJwk;
    const header = { typ: 'dpop+jwt', alg: key.publicJwk.alg, jwk };
    const proof = (nonce: string | undefined, options: ProofOptions = {}) => dpopProof(options.key ?? key, 'GET', url, { ...options, accessToken: tokens.accessToken, nonce });
    const one = (options: ProofOptions = {}) => async (nonce: string | undefined) => [await proof(nonce, options)];
    const tampered = (change: (jws: string) => string) => async (nonce: string | undefined) => [change(await proof(nonce))];
    const privateJwk = await crypto.subtle.exportKey('jwk', key.privateKey);
    const fixedJti = randomUUID();
    const upperUrl = url.replace(/^[a-z]+:\/\/[^/]+/, (origin) => origin.toUpperCase());
    const cases: NegativeCase[] = [
      { what: 'two DPoP headers', proofs: async (nonce) => [await proof(nonce), await proof(nonce)], succeeds: false, graded: true },
      { what: 'a proof that is not a well-formed JWT', proofs: async () => ['not-a.well-formed.jwt'], succeeds: false, graded: true },
      { what: 'no typ', proofs: one({ header: { typ: undefined } }), succeeds: false, graded: true },
      { what: 'no alg', proofs: tampered((jws) => withHeader(jws, { typ: 'dpop+jwt', jwk })), succeeds: false, graded: true },
      { what: 'no jwk', proofs: one({ header: { jwk: undefined } }), succeeds: false, graded: true },
      ...(['jti', 'htm', 'htu', 'iat', 'ath'] as const).map((claim): NegativeCase => ({ what: `no ${claim}`, proofs: one({ omit: [claim] }), succeeds: false, graded: true })),
      { what: 'typ dpop+jwt+wrongyousee', proofs: one({ header: { typ: 'dpop+jwt+wrongyousee' } }), succeeds: false, graded: true },
      { what: 'alg RS256', proofs: tampered((jws) => withHeader(jws, { ...header, alg: 'RS256' })), succeeds: false, graded: true },
      { what: 'alg none', proofs: tampered((jws) => `${part({ ...header, alg: 'none' })}.${jws.split('.')[1]}.`), succeeds: false, graded: true },
      { what: 'an invalid signature', proofs: tampered((jws) => { const [h, p, sig] = jws.split('.'); return `${h}.${p}.${sig!.startsWith('A') ? 'B' : 'A'}${sig!.slice(1)}`; }), succeeds: false, graded: true },
      { what: 'the private key in jwk', proofs: one({ header: { jwk: privateJwk } }), succeeds: false, graded: true },
      { what: 'htm PUT', proofs: one({ claims: { htm: 'PUT' } }), succeeds: false, graded: true },
      { what: 'a query and fragment in htu (to be ignored)', proofs: one({ claims: { htu: `${url}?foo=bar#frag` } }), succeeds: true, graded: true },
      { what: 'another URL in htu', proofs: one({ claims: { htu: `${url}/different` } }), succeeds: false, graded: true },
      { what: 'iat an hour ahead', proofs: one({ claims: { iat: now() + 3600 } }), succeeds: false, graded: true, nonceRelaxes: true },
      { what: 'iat an hour ago', proofs: one({ claims: { iat: now() - 3600 } }), succeeds: false, graded: true, nonceRelaxes: true },
      { what: 'a jti, first use', proofs: one({ claims: { jti: fixedJti } }), succeeds: true, graded: true },
      { what: 'the same jti again', proofs: one({ claims: { jti: fixedJti } }), succeeds: false, graded: false },
      { what: 'a wrong ath', proofs: one({ claims: { ath: 'bm90LXRoZS1oYXNo' } }), succeeds: false, graded: true },
      { what: 'another key than the token is bound to', proofs: one({ key: await newKeyPair() }), succeeds: false, graded: true },
      { what: 'extra claims in its header and payload (to be ignored)', proofs: one({ header: { tx_id: now() }, claims: { tx_id_key: now() } }), succeeds: true, graded: true },
      { what: 'htu with the scheme and host in upper case', proofs: one({ claims: { htu: upperUrl } }), succeeds: true, graded: false },
      { what: 'no proof', proofs: async () => [], succeeds: false, graded: true },
      { what: 'no proof, the token sent as Bearer', proofs: async () => [], scheme: 'Bearer', succeeds: false, graded: true },
    ];
    for (const each of cases) await negativeCase(ctx, url, tokens.accessToken, each);
  },
};

/** CallProtectedResourceAllowingDpopNonceError, retried once with the server's nonce, then graded. */
async function negativeCase(ctx: ModuleContext, url: string, accessToken: string, each: NegativeCase): Promise<void> {
  const send = async (nonce: string | undefined) => {
    const headers = new Headers({ accept: 'application/json', authorization: `${each.scheme ?? 'DPoP'} ${accessToken}` });
    for (const value of await each.proofs(nonce)) headers.append('DPoP', value);
    return ctx.http.send({ method: 'GET', url, headers: Object.fromEntries(headers) });
  };
  let response = await send(undefined);
  const nonce = response.headers.get('dpop-nonce');
  const askedNonce = response.status === 401 && /use_dpop_nonce/.test(response.headers.get('www-authenticate') ?? '') && nonce !== null;
  if (askedNonce) response = await send(nonce);
  const succeeds = each.succeeds || (askedNonce && each.nonceRelaxes === true);
  const graded = each.graded && !(askedNonce && each.nonceRelaxes === true);
  const ok = succeeds ? response.status === 200 || response.status === 201 : response.status === 400 || response.status === 401;
  const message = `a proof with ${each.what}: the resource answered ${response.status}, expected ${succeeds ? '200' : '400 or 401'} (DPOP-4.3, DPOP-7.1)`;
  if (graded) ctx.check(ok, message);
  else ctx.warn(ok, message);
}
