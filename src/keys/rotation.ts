import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';

import { MIN_PREPUBLISH_SECONDS } from '../../config/lifetimes.ts';
import { isoTime } from '../shared/clock.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';

/**
 * Signing-key rotation without downtime: the key set as stored, and what it means at a given time.
 *
 * Keys come in generations: each rotation adds one ES256 key (access tokens) and one RS256 key
 * (ID tokens; signed userinfo uses either), published, signing and retired together. A generation
 * goes through these states, each decided by the time alone, so every instance reading the same
 * stored set agrees without anyone writing at each step:
 *
 * - `next`: published in the JWKS but not signing, from the rotation until `signsFrom` (the
 *   pre-publication period, KEY_PREPUBLISH), so resource servers' cached copies of the JWKS
 *   pick it up before a token signed by it reaches them;
 * - `current`: the newest generation whose `signsFrom` has passed; its keys sign;
 * - `retiring`: replaced by a newer one; still published and verifying until `removedAt`, the
 *   moment its successor began to sign plus KEY_RETENTION (by default the longest JWT lifetime
 *   plus clock skew), when every token it signed has expired;
 * - `retired`: gone from the JWKS and from verification; dropped from the store at the next rotation.
 *
 * How the engine is made to sign with the current keys only: oidc-provider picks, for an
 * algorithm, the first key of its keystore of that type (all ours say `alg` and `use`, so none
 * scores higher), and publishes every key of its keystore at /oauth/jwks in the same order. So
 * the host gives it the current keys first, then the next ones, then the retiring ones: the
 * current ones sign, all of them are published and verify (engineJwks).
 */

/** Seconds since the epoch. */
type Seconds = number;

export interface KeyGeneration {
  /** The kids of its keys (one ES256, one RS256). */
  kids: string[];
  publishedAt: Seconds;
  signsFrom: Seconds;
  /** Set when a newer generation is made: when this one leaves the JWKS. */
  removedAt?: Seconds;
}

/**
 * What the `signing_jwks` setting holds, sealed with the key-encryption key. `keys` is a private
 * JWKS ordered as the engine signs at the time of writing, the shape a version from before
 * rotation reads (it then signs with the key that was current at the write); `generations`, oldest
 * first, says when each key signs. A set stored before rotation existed has no `generations`.
 */
export interface StoredKeySet {
  keys: JWK[];
  generations?: KeyGeneration[];
}

/** A key set whose schedule is known (see adoptKeySet for one stored before rotation existed). */
export interface KeySet {
  keys: JWK[];
  generations: KeyGeneration[];
}

export type KeyState = 'next' | 'current' | 'retiring' | 'retired';

export interface KeyStatus {
  kid: string;
  alg: string;
  state: KeyState;
  publishedAt: Seconds;
  signsFrom: Seconds;
  /** When a newer generation took or takes over; undefined for the newest. */
  signsUntil?: Seconds;
  removedAt?: Seconds;
}

export interface RotationTimes {
  /** KEY_PREPUBLISH: how long a new key is published before it signs. */
  prepublishSeconds: number;
  /** KEY_RETENTION: how long a replaced key keeps verifying after it stops signing. */
  retentionSeconds: number;
}

/**
 * How long each instance may go without seeing a change of the stored set: it re-reads it this
 * often (rotation_watch.ts), as it does every other change made elsewhere (src/shared/propagation.ts). A
 * key must be published at least this long, and a little more, before it signs, or another
 * instance could meet a token signed by a key it does not know yet.
 */
export const KEY_SET_POLL_MS = PROPAGATION_BOUND_MS;

/** A rotation refused because one is already under way. */
export class RotationPendingError extends Error {
  override name = 'RotationPendingError';
}

/** A set stored before rotation existed: its keys become the current generation, as of `at`. */
export function adoptKeySet(stored: StoredKeySet, at: Seconds): KeySet {
  return stored.generations ? { keys: stored.keys, generations: stored.generations } : firstKeySet(stored.keys, at);
}

/** The first key set: one generation, signing at once. */
export function firstKeySet(keys: JWK[], at: Seconds): KeySet {
  return { keys, generations: [{ kids: keys.map((key) => key.kid!), publishedAt: at, signsFrom: at }] };
}

/** Each generation's state at `at`; oldest first. */
export function generationStates(set: KeySet, at: Seconds): Array<{ generation: KeyGeneration; state: KeyState; signsUntil?: Seconds }> {
  const ordered = [...set.generations].sort((a, b) => a.signsFrom - b.signsFrom);
  const signing = ordered.filter((generation) => generation.signsFrom <= at && !isRemoved(generation, at));
  const current = signing.at(-1) ?? ordered.find((generation) => !isRemoved(generation, at));
  return ordered.map((generation, index) => {
    const signsUntil = ordered[index + 1]?.signsFrom;
    const state: KeyState = isRemoved(generation, at) ? 'retired'
      : generation === current ? 'current'
        : generation.signsFrom > at ? 'next'
          : 'retiring';
    return { generation, state, ...(signsUntil === undefined ? {} : { signsUntil }) };
  });
}

function isRemoved(generation: KeyGeneration, at: Seconds): boolean {
  return generation.removedAt !== undefined && generation.removedAt <= at;
}

/** Every key with its state and dates, in the order of the generations. */
export function keyStatuses(set: KeySet, at: Seconds): KeyStatus[] {
  const byKid = new Map(set.keys.map((key) => [key.kid!, key]));
  return generationStates(set, at).flatMap(({ generation, state, signsUntil }) => generation.kids.map((kid) => ({
    kid,
    alg: byKid.get(kid)?.alg ?? 'unknown',
    state,
    publishedAt: generation.publishedAt,
    signsFrom: generation.signsFrom,
    ...(signsUntil === undefined ? {} : { signsUntil }),
    ...(generation.removedAt === undefined ? {} : { removedAt: generation.removedAt }),
  })));
}

const STATE_ORDER: Record<KeyState, number> = { current: 0, next: 1, retiring: 2, retired: 3 };

/**
 * The private JWKS for the engine and the verifiers at `at`: current keys first (they sign),
 * then next, then retiring ones, newest first (published and verifying only); retired ones left out.
 */
export function engineJwks(set: KeySet, at: Seconds): { keys: JWK[] } {
  const byKid = new Map(set.keys.map((key) => [key.kid!, key]));
  const generations = generationStates(set, at)
    .filter(({ state }) => state !== 'retired')
    .sort((a, b) => STATE_ORDER[a.state] - STATE_ORDER[b.state] || b.generation.signsFrom - a.generation.signsFrom);
  return { keys: generations.flatMap(({ generation }) => generation.kids.map((kid) => byKid.get(kid)).filter((key) => key !== undefined)) };
}

/** Whether a generation is published and waiting to sign. */
export function pendingGeneration(set: KeySet, at: Seconds): KeyGeneration | undefined {
  return generationStates(set, at).find(({ state }) => state === 'next')?.generation;
}

export interface RotationRequest extends RotationTimes {
  at: Seconds;
  /** The new keys (newKeys()); unused when a pending generation is promoted. */
  keys: JWK[];
  /** Sign as soon as every instance has the keys (MIN_PREPUBLISH_SECONDS) instead of after KEY_PREPUBLISH; promotes a pending generation. */
  promptly: boolean;
}

/**
 * The set after a rotation at `at`: a new generation, published now, signing after the
 * pre-publication period; the current one then retiring, gone KEY_RETENTION after that. With a
 * generation already pending, a plain rotation is refused (one at a time) and a prompt one makes
 * the pending generation sign shortly instead. Retired generations are dropped.
 */
export function rotated(set: KeySet, request: RotationRequest): KeySet {
  const { at, promptly } = request;
  const pending = pendingGeneration(set, at);
  if (pending && !promptly) {
    throw new RotationPendingError(`a rotation is already under way: keys ${pending.kids.join(', ')} were published at ${isoTime(pending.publishedAt)} and sign from ${isoTime(pending.signsFrom)}; add --now to make them sign now`);
  }
  const signsFrom = at + (promptly ? MIN_PREPUBLISH_SECONDS : request.prepublishSeconds);
  const live = set.generations.filter((generation) => !isRemoved(generation, at));
  const generations = pending
    ? live.map((generation) => generation === pending ? { ...generation, signsFrom: Math.min(generation.signsFrom, signsFrom) } : generation)
    : [...live, { kids: request.keys.map((key) => key.kid!), publishedAt: at, signsFrom }];
  const newest = generations.at(-1)!;
  // Whatever signs until the newest takes over keeps verifying for the retention period after that.
  const scheduled = generations.map((generation) => generation === newest ? generation : {
    ...generation,
    removedAt: Math.min(generation.removedAt ?? Infinity, newest.signsFrom + request.retentionSeconds),
  });
  const kept = new Set(scheduled.flatMap((generation) => generation.kids));
  const keys = [...set.keys, ...(pending ? [] : request.keys)].filter((key) => kept.has(key.kid!));
  const next: KeySet = { keys, generations: scheduled };
  return { keys: engineJwks(next, at).keys, generations: scheduled };
}

/**
 * Whether the schedule (KEY_ROTATION_DAYS) calls for a rotation at `at`: the current generation
 * has signed for the period less the pre-publication (so each generation signs for the period),
 * and none is pending.
 */
export function rotationDue(set: KeySet, at: Seconds, everySeconds: number, prepublishSeconds: number): boolean {
  const states = generationStates(set, at);
  if (states.some(({ state }) => state === 'next')) return false;
  const current = states.find(({ state }) => state === 'current')?.generation;
  return current !== undefined && at >= current.signsFrom + everySeconds - prepublishSeconds;
}

/** One generation's keys: ES256 for access tokens, RS256 for ID tokens. */
export async function newKeys(): Promise<JWK[]> {
  return Promise.all([
    privateJwk('ES256', generateKeyPair('ES256', { extractable: true })),
    privateJwk('RS256', generateKeyPair('RS256', { extractable: true, modulusLength: 2048 })),
  ]);
}

async function privateJwk(alg: string, pair: Promise<CryptoKeyPair>): Promise<JWK> {
  const jwk = await exportJWK((await pair).privateKey);
  return { ...jwk, alg, use: 'sig', kid: await calculateJwkThumbprint(jwk) };
}
