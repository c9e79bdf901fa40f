import type { SettingStore } from '../../adapters/store.ts';
import { isSealed, type KeyRing } from './key_encryption.ts';
import { adoptKeySet, firstKeySet, newKeys, rotated, type KeySet, type RotationRequest, type StoredKeySet } from './rotation.ts';
import { nowSeconds } from '../shared/clock.ts';

/**
 * The signing key set in the store: the `signing_jwks` setting, always sealed with the
 * key-encryption key. Every change is a compare-and-set on what was read, so two instances or two
 * admin commands never both rotate, and a re-seal under a new key-encryption key never undoes a
 * rotation written meanwhile.
 */

export const SIGNING_KEYS_SETTING = 'signing_jwks';

/** Attempts before giving up when other writers keep changing the set (each attempt re-reads it). */
const WRITE_ATTEMPTS = 5;

export class KeySetConflictError extends Error {
  override name = 'KeySetConflictError';
}

/** The sealed value as read, and what it holds; `value` is what a compare-and-set expects. */
export interface ReadKeySet {
  value: string;
  set: KeySet;
}

export function openKeySet(keyRing: KeyRing, value: string, at: number): KeySet {
  return adoptKeySet(JSON.parse(isSealed(value) ? keyRing.open(value) : value) as StoredKeySet, at);
}

/**
 * The stored set, created on first start (instances starting together keep the first writer's),
 * and brought up to date once: given a schedule if stored before rotation existed, sealed if
 * stored in the clear, re-sealed if sealed with a key-encryption key since rotated.
 */
export async function loadKeySet(settings: SettingStore, keyRing: KeyRing): Promise<ReadKeySet> {
  let value = await settings.get(SIGNING_KEYS_SETTING);
  if (value === undefined) {
    const first = keyRing.seal(JSON.stringify(firstKeySet(await newKeys(), nowSeconds())));
    value = await settings.setIfAbsent(SIGNING_KEYS_SETTING, first);
  }
  for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt += 1) {
    const stored = JSON.parse(isSealed(value) ? keyRing.open(value) : value) as StoredKeySet;
    const set = adoptKeySet(stored, nowSeconds());
    if (stored.generations && keyRing.isSealedWithCurrentKey(value)) return { value, set };
    const updated = keyRing.seal(JSON.stringify(set));
    if (await settings.compareAndSet(SIGNING_KEYS_SETTING, value, updated)) return { value: updated, set };
    value = (await settings.get(SIGNING_KEYS_SETTING))!;
  }
  throw new KeySetConflictError('the signing keys kept changing while being read; try again');
}

/**
 * Writes a rotation (rotation.ts `rotated`) of the set as it is now; re-reads and retries
 * when another writer got there first, so a rotation is made once however many ask at once
 * (the others then find it pending: RotationPendingError, unless they asked for it promptly).
 */
export async function rotateKeySet(settings: SettingStore, keyRing: KeyRing, request: Omit<RotationRequest, 'at'>): Promise<KeySet> {
  for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt += 1) {
    const { value, set } = await loadKeySet(settings, keyRing);
    const next = rotated(set, { ...request, at: nowSeconds() });
    if (await settings.compareAndSet(SIGNING_KEYS_SETTING, value, keyRing.seal(JSON.stringify(next)))) return next;
  }
  throw new KeySetConflictError('the signing keys kept changing during the rotation; try again');
}
