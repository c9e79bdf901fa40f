import { createSecretKey, hkdfSync, timingSafeEqual, type KeyObject } from 'node:crypto';

import { nowSeconds, systemClock, type Clock } from '../shared/clock.ts';

/** What the nonce key is derived for (KeyRing.derivedKeys): every instance derives the same one. */
export const DPOP_NONCE_PURPOSE = 'DPoP nonces';

/** A nonce is one per minute; it is good in the minute it names and two either side. */
const STEP_SECONDS = 60;
const STEPS_EITHER_SIDE = 2;

/**
 * Server nonces for DPoP proofs at the APIs (RFC 9449 section 9), made the way the engine makes
 * its own for the token endpoint: the minute's number under an HKDF of a key every instance
 * derives alike, so a nonce one instance hands out is good at all of them, with nothing stored.
 * The APIs' nonces are not the token endpoint's (RFC 9449 section 8: each server its own).
 */
export class DpopNonces {
  /** A key object, not the buffer: Node checks a raw key's kind at every derivation, at a cost. */
  readonly #secret: KeyObject;
  readonly #clock: Clock;

  constructor(secret: Buffer, clock: Clock = systemClock) {
    this.#secret = createSecretKey(secret);
    this.#clock = clock;
  }

  /** The nonce to hand out now: the next minute's, so it stays good for three minutes or more. */
  next(): string {
    return this.#nonce(this.#step() + 1);
  }

  /** Whether `nonce` is one this server handed out within the last few minutes. */
  isCurrent(nonce: string): boolean {
    const presented = Buffer.from(nonce);
    const step = this.#step();
    let matched = false;
    for (let offset = -STEPS_EITHER_SIDE; offset <= STEPS_EITHER_SIDE; offset += 1) {
      const expected = Buffer.from(this.#nonce(step + offset));
      if (expected.length === presented.length && timingSafeEqual(expected, presented)) matched = true;
    }
    return matched;
  }

  #step(): number {
    return Math.floor(nowSeconds(this.#clock) / STEP_SECONDS);
  }

  #nonce(step: number): string {
    const salt = Buffer.alloc(8);
    salt.writeBigUInt64BE(BigInt(step));
    return Buffer.from(hkdfSync('sha256', this.#secret, salt, 'DPoP at the APIs', 32)).toString('base64url');
  }
}
