import type { ModuleContext } from '../context.ts';
import { newKeyPair, postWithDpop, registerFapiClient, thumbprint, type AssertionOptions, type KeyPair } from '../client/fapi2_client.ts';
import { sleep } from '../flows/two_authorizations.ts';
import {
  acceptTokens, callResource, checkEndpointError, fapiCode, fapiRequest, fapiSetUp, push, redeem, type FapiSession,
} from '../flows/fapi2_flow.ts';
import type { ConformanceModule } from '../module.ts';

/** A code obtained normally, then redeemed in a way the OP must refuse. */
function redeemFails(
  name: string,
  summary: string,
  redeemAs: (ctx: ModuleContext, session: FapiSession, code: string, request: ReturnType<typeof fapiRequest>) => ReturnType<typeof redeem>,
  statuses: number[],
  errors: string[],
  spec: string,
  extraKeys: KeyPair[] = [],
): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await fapiSetUp(ctx, name, { extraKeys });
      const request = fapiRequest(session);
      const code = await fapiCode(ctx, session, request);
      checkEndpointError(ctx, await redeemAs(ctx, session, code, request), statuses, errors, spec);
    },
  };
}

/** The code redeemed by the module's second client (its own assertion). */
async function secondClientRedeems(ctx: ModuleContext, session: FapiSession, code: string, request: ReturnType<typeof fapiRequest>) {
  const second = await registerFapiClient(ctx, session.provider, `${session.moduleName} 2`);
  return redeem(ctx, { ...session, client: second }, code, request);
}

export const fapi2ClientIdInTokenEndpoint = redeemFails(
  'fapi2-security-profile-final-ensure-client-id-in-token-endpoint',
  'the code redeemed with another client\'s client_id and assertion: 400 (or 401) invalid_client or invalid_grant',
  secondClientRedeems, [400, 401], ['invalid_client', 'invalid_grant'], 'RFC6749-5.2',
);

export const fapi2CodeBoundToClient = redeemFails(
  'fapi2-security-profile-final-ensure-authorization-code-is-bound-to-client',
  'the code redeemed by another registered client: 400 invalid_grant',
  secondClientRedeems, [400], ['invalid_grant'], 'RFC6749-4.1.3',
);

export const fapi2HolderOfKeyRequired = redeemFails(
  'fapi2-security-profile-final-ensure-holder-of-key-required',
  'the code redeemed without a DPoP proof: refused (sender-constrained tokens only). The TLS checks do not apply to a loopback http deployment',
  (ctx, session, code, request) => redeem(ctx, session, code, request, { proof: false }),
  [400], ['invalid_request', 'invalid_grant', 'invalid_dpop_proof'], 'RFC6749-5.2, RFC9449-5',
);

export const fapi2ClientAssertionInTokenEndpoint = redeemFails(
  'fapi2-security-profile-final-ensure-client-assertion-in-token-endpoint',
  'the code redeemed with client_id alone, no client assertion: 400 (or 401) invalid_client or invalid_request',
  (ctx, session, code, request) => redeem(ctx, session, code, request, { assertion: false }),
  [400, 401], ['invalid_client', 'invalid_request'], 'RFC6749-5.2',
);

function assertionFails(name: string, summary: string, assertion: () => AssertionOptions, errors: string[], extraKeys: KeyPair[] = []): ConformanceModule {
  return redeemFails(name, summary, (ctx, session, code, request) => redeem(ctx, session, code, request, { assertion: assertion() }), [400, 401], errors, 'RFC7523-3, FAPI2-SP-FINAL-5.3.2.1', extraKeys);
}

const now = () => Math.floor(Date.now() / 1000);

/** An RS256 key every run's RS256 module registers beside the client's ES256 one, made once. */
const rsaKey = await newKeyPair('RS256');

export const fapi2AssertionRs256 = assertionFails(
  'fapi2-security-profile-final-ensure-signed-client-assertion-with-RS256-fails',
  'a client assertion signed RS256 with a key the client registered: invalid_client (FAPI 2.0 allows PS256, ES256, EdDSA)',
  () => ({ key: rsaKey }), ['invalid_client'], [rsaKey],
);

export const fapi2AssertionExpired = assertionFails(
  'fapi2-security-profile-final-ensure-client-assertion-with-exp-is-5-minutes-in-past-fails',
  'a client assertion that expired 5 minutes ago: invalid_client',
  () => ({ claims: { iat: now() - 360, exp: now() - 300 } }), ['invalid_client', 'invalid_request'],
);

export const fapi2AssertionWrongAud = assertionFails(
  'fapi2-security-profile-final-ensure-client-assertion-with-wrong-aud-fails',
  'a client assertion whose aud is another server: invalid_client',
  () => ({ claims: { aud: 'https://other.conformance.invalid' } }), ['invalid_client', 'invalid_request'],
);

export const fapi2AssertionNoSub = assertionFails(
  'fapi2-security-profile-final-ensure-client-assertion-with-no-sub-fails',
  'a client assertion without sub: invalid_client',
  () => ({ omit: ['sub'] }), ['invalid_client', 'invalid_request'],
);

export const fapi2ReuseCodeAfterOneSecond: ConformanceModule = {
  name: 'fapi2-security-profile-final-attempt-reuse-authorization-code-after-one-second',
  summary: 'the code redeemed, then again a second later: 400 invalid_grant',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const code = await fapiCode(ctx, session, request);
    await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
    await sleep(1000);
    checkEndpointError(ctx, await redeem(ctx, session, code, request), [400], ['invalid_grant'], 'RFC6749-4.1.2');
  },
};

const pkceAtToken = (name: string, summary: string, verifier: (request: ReturnType<typeof fapiRequest>) => Record<string, string>) => redeemFails(
  name, summary,
  (ctx, session, code, request) => redeem(ctx, session, code, { ...request, codeVerifier: undefined }, { form: verifier(request) }),
  [400], ['invalid_grant'], 'RFC7636-4.6',
);

export const fapi2CodeVerifierRequired = pkceAtToken(
  'fapi2-security-profile-final-ensure-pkce-code-verifier-required', 'the code redeemed without its code_verifier: 400 invalid_grant', () => ({}),
);

export const fapi2IncorrectCodeVerifier = pkceAtToken(
  'fapi2-security-profile-final-incorrect-pkce-code-verifier-rejected', 'the code redeemed with a wrong code_verifier: 400 invalid_grant',
  (request) => ({ code_verifier: `${request.codeVerifier!.slice(0, -1)}${request.codeVerifier!.endsWith('A') ? 'B' : 'A'}` }),
);

/** How long the suite waits before it refreshes again with the refresh token a rotation replaced (WaitFor30Seconds). */
const PREVIOUS_REFRESH_TOKEN_AFTER_MS = 30_000;

export const fapi2RefreshToken: ConformanceModule = {
  name: 'fapi2-security-profile-final-refresh-token',
  summary: 'the refresh token redeemed with private_key_jwt and a DPoP proof: new DPoP-bound tokens; when the refresh rotated it, the previous one (what a client that lost the answer holds) still refreshes 30 s later; without a proof refused',
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const code = await fapiCode(ctx, session, request);
    const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
    if (tokens.refreshToken === undefined) ctx.notSupported('no refresh token was issued; the suite skips the refresh');
    const tokenEndpoint = session.provider.metadata.token_endpoint!;
    const refresh = (refreshToken: string, options: { proof?: false } = {}) => postWithDpop(
      ctx, session.client, session.provider, tokenEndpoint, { grant_type: 'refresh_token', refresh_token: refreshToken }, options,
    );
    const refreshedRequest = { ...request, params: { ...request.params, scope: 'api' } };
    const next = await acceptTokens(ctx, session, await refresh(tokens.refreshToken), refreshedRequest);
    await callResource(ctx, session, next);
    let latest = next.refreshToken ?? tokens.refreshToken;
    if (latest === tokens.refreshToken) {
      ctx.note('Refresh token not rotated. Skipping lost refresh token test.');
    } else {
      // The suite restores the previous refresh token, as a client that never got the answer holds, and refreshes with it.
      await sleep(PREVIOUS_REFRESH_TOKEN_AFTER_MS);
      const retried = await refresh(tokens.refreshToken);
      ctx.require(retried.response.status === 200, `the refresh with the previous refresh token, after a rotation, answered ${retried.response.status}: a server that rotates refresh tokens must let the retry with the previous one succeed (FAPI2-SP-FINAL-5.3.2.1-10): ${retried.response.text.slice(0, 300)}`, retried.exchange);
      latest = (await acceptTokens(ctx, session, retried, refreshedRequest)).refreshToken ?? tokens.refreshToken;
    }
    checkEndpointError(ctx, await refresh(latest, { proof: false }), [400], ['invalid_client', 'invalid_grant', 'invalid_request'], 'RFC6749-5.2, FAPI2-SP-FINAL-5.3.2.1');
  },
};

/** PAR binds the code to a DPoP key (a proof at PAR, or dpop_jkt); the token request proves it, or not. */
function dpopBinding(name: string, summary: string, bind: 'proof' | 'dpop_jkt', redeemWith: 'same' | 'other', mismatchAtPar = false): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await fapiSetUp(ctx, name);
      const other = await newKeyPair();
      const request = fapiRequest(session, bind === 'dpop_jkt' ? { extra: { dpop_jkt: await thumbprint(mismatchAtPar ? other : session.client.dpopKey) } } : {});
      if (mismatchAtPar) {
        // dpop_jkt names one key, the proof at PAR another: the OP must refuse the push.
        const pushed = await push(ctx, session, request, { proof: {} });
        checkEndpointError(ctx, pushed, [400], ['invalid_request', 'invalid_dpop_proof'], 'RFC9449-10');
        return;
      }
      const code = await fapiCode(ctx, session, request, { proof: bind === 'proof' ? {} : false });
      const answer = await redeem(ctx, session, code, request, redeemWith === 'other' ? { proof: { key: other } } : {});
      if (redeemWith === 'other') {
        checkEndpointError(ctx, answer, [400], ['invalid_request', 'invalid_grant', 'invalid_dpop_proof'], 'RFC9449-10');
        return;
      }
      const tokens = await acceptTokens(ctx, session, answer, request);
      await callResource(ctx, session, tokens);
    },
  };
}

export const fapi2MismatchedDpopJkt = dpopBinding(
  'fapi2-security-profile-final-ensure-mismatched-dpop-jkt-fails', 'dpop_jkt at PAR naming another key than the PAR request\'s DPoP proof: refused', 'dpop_jkt', 'same', true,
);
export const fapi2TokenMismatchedProofJkt = dpopBinding(
  'fapi2-security-profile-final-ensure-token-endpoint-fails-with-mismatched-dpop-proof-jkt', 'the code bound by a DPoP proof at PAR, redeemed with another key: refused', 'proof', 'other',
);
export const fapi2TokenMismatchedDpopJkt = dpopBinding(
  'fapi2-security-profile-final-ensure-token-endpoint-fails-with-mismatched-dpop-jkt', 'the code bound by dpop_jkt at PAR, redeemed with another key: refused', 'dpop_jkt', 'other',
);
export const fapi2DpopProofAtParBinding = dpopBinding(
  'fapi2-security-profile-final-ensure-dpopproof-at-par-endpoint-binding-success', 'a DPoP proof at PAR, the code redeemed with the same key: tokens', 'proof', 'same',
);
export const fapi2DpopJktBinding = dpopBinding(
  'fapi2-security-profile-final-ensure-dpop-auth-code-binding-success', 'dpop_jkt at PAR, the code redeemed with that key: tokens', 'dpop_jkt', 'same',
);

/** A DPoP proof whose iat is off by some seconds, at the token endpoint: accepted within the OP's allowance. */
function proofIat(name: string, summary: string, offset: number): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await fapiSetUp(ctx, name);
      const request = fapiRequest(session);
      const code = await fapiCode(ctx, session, request);
      const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request, { proof: { claims: { iat: now() + offset } } }), request);
      await callResource(ctx, session, tokens);
    },
  };
}

export const fapi2DpopIat10Before = proofIat('fapi2-security-profile-final-ensure-dpopproof-with-iat-10seconds-before-succeeds', 'a DPoP proof made 10 s ago: accepted', -10);
export const fapi2DpopIat10After = proofIat('fapi2-security-profile-final-ensure-dpopproof-with-iat-10seconds-after-succeeds', 'a DPoP proof dated 10 s ahead: accepted (clock skew)', 10);
