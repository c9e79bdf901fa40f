import { hash } from 'node:crypto';

import { calculateJwkThumbprint, EmbeddedJWK, jwtVerify, type JWTPayload } from 'jose';
import type { AsymmetricSigningAlgorithm } from 'oidc-provider';

import type { ModelStore } from '../../adapters/store.ts';
import { nowSeconds, systemClock, type Clock } from '../shared/clock.ts';
import { withNormalPercentEncoding } from '../shared/percent_encoding.ts';
import type { DpopNonces } from './dpop_nonces.ts';

/**
 * The algorithms a DPoP proof may be signed with, at the token endpoint and at the APIs: the
 * engine's (ES256, Ed25519, EdDSA) and PS256, which FAPI 2.0 allows and RSA-only clients can sign.
 */
export const DPOP_SIGNING_ALGORITHMS: AsymmetricSigningAlgorithm[] = ['ES256', 'PS256', 'EdDSA', 'Ed25519'];

/** How far from now a proof without a nonce may say it was made (the engine's window at the token endpoint). */
const PROOF_IAT_WINDOW_SECONDS = 300;
/** A proof's `jti` is remembered for as long as a proof could still be accepted: made up to a window ahead, accepted a window after. */
const JTI_REMEMBERED_SECONDS = 2 * PROOF_IAT_WINDOW_SECONDS;

/** The request a proof must have been made for. */
export interface ProvenRequest {
  /** The DPoP header's value, if any. */
  proof: string | undefined;
  method: string;
  /** The request's URL as the client addressed it (query and fragment are ignored). */
  url: string;
  /** The access token sent with it: the proof must name its hash (`ath`). */
  accessToken: string;
  /** The thumbprint of the key the token is bound to (`cnf.jkt`). */
  jkt: string;
}

/** Why a proof was refused, in RFC 9449's error codes; `use_dpop_nonce` comes with a fresh nonce to retry with. */
export type ProofRefusal =
  | { error: 'invalid_dpop_proof'; description: string }
  | { error: 'use_dpop_nonce'; description: string; nonce: string };

/**
 * Checks DPoP proofs at the APIs (RFC 9449 sections 4.3 and 7.1), as the engine checks them at the
 * token endpoint: a `dpop+jwt` signed by the public key in its header with an allowed algorithm,
 * for this method and URL, for this access token (`ath`), by the key the token is bound to, made
 * recently or carrying a nonce this server handed out, and used once on every instance (its
 * `jti` inserted atomically into the store, so a proof replayed to another instance is refused too).
 */
export class DpopProofs {
  readonly #usedProofs: ModelStore;
  readonly #nonces: DpopNonces;
  readonly #nonceRequired: boolean;
  readonly #clock: Clock;

  constructor(usedProofs: ModelStore, nonces: DpopNonces, nonceRequired: boolean, clock: Clock = systemClock) {
    this.#usedProofs = usedProofs;
    this.#nonces = nonces;
    this.#nonceRequired = nonceRequired;
    this.#clock = clock;
  }

  /** A nonce for the client's next proof (sent as `DPoP-Nonce`). */
  nextNonce(): string {
    return this.#nonces.next();
  }

  /** Undefined when the proof holds; else why not. */
  async refusal(request: ProvenRequest): Promise<ProofRefusal | undefined> {
    const invalid = (description: string): ProofRefusal => ({ error: 'invalid_dpop_proof', description });
    const needsNonce = (description: string): ProofRefusal => ({ error: 'use_dpop_nonce', description, nonce: this.#nonces.next() });
    if (!request.proof) return invalid('a DPoP-bound access token needs a DPoP proof (the DPoP header)');

    const verified = await this.#verify(request.proof);
    if (typeof verified === 'string') return invalid(verified);
    const { claims, thumbprint } = verified;
    if (typeof claims.jti !== 'string' || claims.jti === '') return invalid('the DPoP proof needs a jti');
    if (typeof claims.iat !== 'number') return invalid('the DPoP proof needs an iat');
    if (claims.htm !== request.method) return invalid('the DPoP proof was made for another method (htm)');
    if (typeof claims.htu !== 'string' || withoutQuery(claims.htu) !== withoutQuery(request.url)) return invalid('the DPoP proof was made for another URL (htu)');
    if (claims.ath !== hash('sha256', request.accessToken, 'base64url')) return invalid('the DPoP proof was made for another access token (ath)');
    if (thumbprint !== request.jkt) return invalid('the DPoP proof is signed with another key than the one the access token is bound to');

    if (claims.nonce !== undefined) {
      if (typeof claims.nonce !== 'string' || !this.#nonces.isCurrent(claims.nonce)) return needsNonce('the DPoP proof\'s nonce is not current; use the one in DPoP-Nonce');
    } else if (this.#nonceRequired) {
      return needsNonce('this server requires a nonce in every DPoP proof; use the one in DPoP-Nonce');
    } else if (Math.abs(nowSeconds(this.#clock) - claims.iat) > PROOF_IAT_WINDOW_SECONDS) {
      return needsNonce('the DPoP proof\'s iat is not recent; make a new one with the nonce in DPoP-Nonce');
    }

    // Last, so that only proofs that hold are remembered.
    const marker = hash('sha256', `DPoP proof at the APIs:${thumbprint}:${claims.jti}`, 'base64url');
    if (!await this.#usedProofs.insertNew(marker, { jti: marker }, JTI_REMEMBERED_SECONDS)) return invalid('the DPoP proof was used before; make a new one for each request');
    return undefined;
  }

  async #verify(proof: string): Promise<{ claims: JWTPayload; thumbprint: string } | string> {
    try {
      const { payload, protectedHeader } = await jwtVerify(proof, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: DPOP_SIGNING_ALGORITHMS, currentDate: new Date(this.#clock()) });
      return { claims: payload, thumbprint: await calculateJwkThumbprint(protectedHeader.jwk!) };
    } catch {
      return 'the DPoP proof is not a dpop+jwt signed with an allowed algorithm by the public key in its header';
    }
  }
}

/**
 * The URL a proof's `htu` is compared as (RFC 9449 section 4.3): without its query and fragment,
 * normalised as RFC 3986 sections 6.2.2 and 6.2.3 say (the URL parser's case, default port and
 * dot segments, and percent-encoding: withNormalPercentEncoding), on both sides.
 */
function withoutQuery(url: string): string | undefined {
  const parsed = URL.parse(url);
  if (!parsed) return undefined;
  parsed.search = '';
  parsed.hash = '';
  return `${parsed.origin}${withNormalPercentEncoding(parsed.pathname)}`;
}
