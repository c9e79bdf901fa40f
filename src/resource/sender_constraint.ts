import type { Context } from 'koa';

import type { DpopProofs } from '../tokens/dpop_proofs.ts';
import type { AccessTokenClaims } from '../tokens/verifier.ts';
import type { AccessCredential, DpopChallenge, Refusal } from './bearer.ts';

/** How an API treats DPoP-bound tokens. */
export interface DpopPolicy {
  proofs: DpopProofs;
  /** The algorithms a proof may be signed with, named in every challenge. */
  algorithms: readonly string[];
  /** It takes DPoP-bound tokens only (DPOP_REQUIRED). */
  required: boolean;
}

/** The DPoP challenge the API sends with every refusal. */
export function dpopChallenge(policy: DpopPolicy): DpopChallenge {
  return { algorithms: policy.algorithms, bearerAccepted: !policy.required };
}

/**
 * Why a verified token may not be used as it was sent (RFC 9449 section 7), or undefined when it
 * may: a token bound to a key (`cnf.jkt`) comes as `Authorization: DPoP` with a proof made by that
 * key for this request and this token; a token bound to nothing comes as `Bearer`, and only where
 * the API takes bearer tokens.
 */
export async function senderConstraintRefusal(ctx: Context, credential: AccessCredential, claims: AccessTokenClaims, policy: DpopPolicy): Promise<Refusal | undefined> {
  const refused = (error: 'invalid_token' | 'invalid_dpop_proof' | 'use_dpop_nonce', description: string, nonce?: string): Refusal => ({
    status: 401, error, description, errorScheme: 'DPoP', ...(nonce ? { nonce } : {}),
  });
  const jkt = claims.cnf?.jkt;
  if (typeof jkt === 'string') {
    if (credential.scheme !== 'DPoP') return refused('invalid_token', 'this access token is bound to a key (DPoP): send it as Authorization: DPoP, with a DPoP proof');
    const proof = await policy.proofs.refusal({ proof: ctx.get('DPoP') || undefined, method: ctx.method, url: ctx.href, accessToken: credential.token, jkt });
    if (!proof) return undefined;
    return proof.error === 'use_dpop_nonce' ? refused(proof.error, proof.description, proof.nonce) : refused(proof.error, proof.description);
  }
  if (credential.scheme === 'DPoP') return refused('invalid_token', 'this access token is not bound to a key: send it as Authorization: Bearer');
  if (policy.required) return refused('invalid_token', 'this API accepts DPoP-bound access tokens only: get one with a DPoP proof at the token endpoint (RFC 9449)');
  return undefined;
}
