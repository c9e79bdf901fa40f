import type { JWK } from 'jose';

import type { SettingStore } from '../../adapters/store.ts';
import type { KeyRotationPolicy } from '../../config/index.ts';
import type { Logger } from '../shared/logger.ts';
import type { KeyRing } from './key_encryption.ts';
import { engineJwks, KEY_SET_POLL_MS, newKeys, RotationPendingError, rotationDue, type KeySet } from './rotation.ts';
import { isoTime, nowSeconds } from '../shared/clock.ts';
import { openKeySet, rotateKeySet, SIGNING_KEYS_SETTING } from './rotation_store.ts';

export interface KeyWatchOptions {
  settings: SettingStore;
  keyRing: KeyRing;
  policy: KeyRotationPolicy;
  logger: Logger;
  /** The engine JWKS the service started with. */
  initial: { keys: JWK[] };
  /** Called with the engine JWKS when the keys that sign, or those published, change. */
  onChange(jwks: { keys: JWK[] }): void;
}

export interface KeyWatch {
  stop(): void;
}

/**
 * How a running instance follows a rotation without a restart: the oidc-provider engine takes its
 * keys once, at construction, and offers no supported way to change them, so the host builds the
 * service anew (engine, token verifier, userinfo signer) with the new set and swaps it in (src/main.ts).
 *
 * Every KEY_SET_POLL_MS this re-reads the stored set (one small read; it is opened only when it
 * changed) and works out which keys sign and which are published now; when that differs from the
 * set in use, `onChange`. So every instance follows a rotation, a key starting to sign and a key
 * leaving the JWKS within KEY_SET_POLL_MS. With KEY_ROTATION_DAYS it also rotates when the
 * schedule says so; when several instances do at once, the store's compare-and-set lets one win.
 */
export function watchSigningKeys(options: KeyWatchOptions): KeyWatch {
  const { settings, keyRing, policy, logger } = options;
  let inUse = fingerprint(options.initial);
  let read: { value: string; set: KeySet } | undefined;
  /** A stored value that could not be opened, reported once. */
  let unreadable: string | undefined;
  /** Whether the stored set was found gone, reported once until it is back. */
  let missing = false;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const current = async (): Promise<KeySet | undefined> => {
    const value = await settings.get(SIGNING_KEYS_SETTING);
    // The store lost what it held (a Redis restarted empty, a store replaced under the service):
    // this instance signs on with the keys it holds, which nothing stored names any more.
    if (value === undefined && !missing) logger.error('the store no longer holds the signing keys (was it emptied, or replaced by another?); keeping the keys in use', {});
    missing = value === undefined;
    if (value === undefined || value === read?.value) return read?.set;
    try {
      read = { value, set: openKeySet(keyRing, value, nowSeconds()) };
      return read.set;
    } catch (error) {
      if (unreadable !== value) logger.error('the stored signing keys cannot be opened; keeping the keys in use', { error: (error as Error).message });
      unreadable = value;
      return read?.set;
    }
  };

  const rotateOnSchedule = async (set: KeySet): Promise<boolean> => {
    if (policy.everySeconds === undefined || !rotationDue(set, nowSeconds(), policy.everySeconds, policy.prepublishSeconds)) return false;
    try {
      const rotatedSet = await rotateKeySet(settings, keyRing, { ...policy, keys: await newKeys(), promptly: false });
      const added = rotatedSet.generations.at(-1)!;
      logger.info('rotated the signing keys on schedule', { kids: added.kids.join(' '), signs_from: isoTime(added.signsFrom) });
    } catch (error) {
      // Another instance rotated first: the next read shows its keys.
      if (!(error instanceof RotationPendingError)) throw error;
    }
    return true;
  };

  const apply = (set: KeySet) => {
    const jwks = engineJwks(set, nowSeconds());
    const next = fingerprint(jwks);
    if (next === inUse) return;
    inUse = next;
    logger.info('signing keys changed', { signing: signingKids(jwks), published: jwks.keys.map((key) => key.kid).join(' ') });
    try {
      options.onChange(jwks);
    } catch (error) {
      logger.error('could not start serving with the new signing keys; keeping the keys in use', { error: (error as Error).message });
    }
  };

  const tick = async () => {
    try {
      let set = await current();
      if (set && await rotateOnSchedule(set)) set = await current();
      if (set) apply(set);
    } catch (error) {
      // A store outage: keep the keys in use and try again.
      logger.warn('could not read the signing keys; keeping the keys in use', { error: (error as Error).name });
    } finally {
      if (!stopped) timer = setTimeout(() => void tick(), KEY_SET_POLL_MS).unref();
    }
  };

  timer = setTimeout(() => void tick(), KEY_SET_POLL_MS).unref();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** The keys in engine order: what signs and what is published. */
function fingerprint(jwks: { keys: JWK[] }): string {
  return jwks.keys.map((key) => key.kid).join(' ');
}

/** The first key of each algorithm signs. */
function signingKids(jwks: { keys: JWK[] }): string {
  const firstOfAlg = new Map<string, string>();
  for (const key of jwks.keys) if (key.alg && !firstOfAlg.has(key.alg)) firstOfAlg.set(key.alg, key.kid!);
  return [...firstOfAlg.values()].join(' ');
}
