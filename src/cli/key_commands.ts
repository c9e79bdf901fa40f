import { setTimeout as sleep } from 'node:timers/promises';

import type { Store } from '../../adapters/store.ts';
import type { Config } from '../../config/index.ts';
import type { Logger } from '../shared/logger.ts';
import { loadKeyRing } from '../keys/key_encryption.ts';
import { KEY_SET_POLL_MS, keyStatuses, newKeys, RotationPendingError, type KeyStatus } from '../keys/rotation.ts';
import { isoTime, nowSeconds } from '../shared/clock.ts';
import { KeySetConflictError, loadKeySet, rotateKeySet } from '../keys/rotation_store.ts';
import { readJwksFile } from '../keys/keys.ts';
import type { Command, Output } from './command.ts';

/** The admin CLI's `keys rotate` and `keys list`: the signing keys. */

/** A refusal to show the operator, exit code 1. */
export class KeyAdminError extends Error {
  override name = 'KeyAdminError';
}

/**
 * `keys rotate`: a new ES256 and RS256 key, published at once (by every instance within
 * KEY_SET_POLL_MS, and the command returns once they are), signing after KEY_PREPUBLISH; the keys
 * they replace verify for KEY_RETENTION after that. `promptly` (--now): they sign as soon as every
 * instance has them, and the command returns once they do; with a rotation already pending, that
 * one is made to sign instead.
 */
export async function rotateSigningKeys(store: Store, config: Config, logger: Logger, promptly: boolean): Promise<Output> {
  if (config.jwksFile) {
    throw new KeyAdminError(`the signing keys come from JWKS_FILE (${config.jwksFile}), which the service never rotates: add the new key to that file, restart every instance, and remove the old key once the tokens it signed have expired`);
  }
  const keyRing = await loadKeyRing(config, logger);
  let set;
  try {
    set = await rotateKeySet(store.settings, keyRing, { ...config.keyRotation, keys: await newKeys(), promptly });
  } catch (error) {
    if (error instanceof RotationPendingError || error instanceof KeySetConflictError) throw new KeyAdminError(error.message);
    throw error;
  }
  const newest = set.generations.at(-1)!;
  // Each instance re-reads the set every KEY_SET_POLL_MS: the command returns once every one
  // publishes the new keys (with --now: signs with them), as `client delete` waits for its change.
  const done = (promptly ? newest.signsFrom * 1000 : Date.now()) + KEY_SET_POLL_MS + 250;
  await sleep(Math.max(0, done - Date.now()));
  const statuses = keyStatuses(set, nowSeconds());
  const added = statuses.filter((status) => newest.kids.includes(status.kid));
  const replaced = statuses.find((status) => status.signsUntil === newest.signsFrom);
  const text = [
    `published ${added.map((key) => `${key.alg} key ${key.kid}`).join(' and ')}`,
    promptly ? `they sign on every instance from now (${isoTime(newest.signsFrom)})` : `they sign from ${isoTime(newest.signsFrom)}, after the pre-publication period (KEY_PREPUBLISH)`,
    replaced?.removedAt === undefined ? undefined : `the keys they replace verify until ${isoTime(replaced.removedAt)}, then leave the JWKS`,
  ].filter(Boolean).join('; ');
  return {
    text: `${text}\n\n${table(statuses)}`,
    json: {
      new_keys: added.map(({ kid, alg }) => ({ kid, alg })),
      signs_from: isoTime(newest.signsFrom),
      replaced_keys_removed_at: replaced?.removedAt === undefined ? null : isoTime(replaced.removedAt),
      keys: statuses.map(shown),
    },
  };
}

/** `keys list`: every stored key with its state and dates, or the keys of JWKS_FILE. */
export async function listSigningKeys(store: Store, config: Config, logger: Logger): Promise<Output> {
  if (config.jwksFile) {
    const { keys } = await readJwksFile(config.jwksFile);
    const listed = keys.map((key) => ({ kid: key.kid ?? null, alg: key.alg ?? null, state: 'current', source: 'JWKS_FILE' }));
    return { text: listed.map((key) => `${key.kid ?? '(no kid)'}\t${key.alg ?? ''}\tcurrent (JWKS_FILE, never rotated)`).join('\n'), json: listed };
  }
  const { set } = await loadKeySet(store.settings, await loadKeyRing(config, logger));
  const statuses = keyStatuses(set, nowSeconds());
  return { text: table(statuses), json: statuses.map(shown) };
}

function shown(status: KeyStatus) {
  return {
    kid: status.kid,
    alg: status.alg,
    state: status.state,
    published_at: isoTime(status.publishedAt),
    signs_from: isoTime(status.signsFrom),
    signs_until: status.signsUntil === undefined ? null : isoTime(status.signsUntil),
    removed_at: status.removedAt === undefined ? null : isoTime(status.removedAt),
  };
}

function table(statuses: KeyStatus[]): string {
  return statuses.map((status) => [
    status.kid, status.alg, status.state,
    `published ${isoTime(status.publishedAt)}`,
    `signs ${isoTime(status.signsFrom)} - ${status.signsUntil === undefined ? '' : isoTime(status.signsUntil)}`,
    `removed ${status.removedAt === undefined ? '-' : isoTime(status.removedAt)}`,
  ].join('\t')).join('\n');
}

export const KEY_COMMANDS: readonly Command[] = [
  {
    name: 'keys rotate',
    synopsis: '[--now]',
    description: 'Publishes new ES256 and RS256 signing keys at once; they sign after KEY_PREPUBLISH, and the keys they\n'
      + 'replace verify for KEY_RETENTION after that. --now: they sign as soon as every instance has them.\n'
      + 'Returns once every instance publishes them.',
    options: ['now'],
    run: ({ store, config, logger, options }) => rotateSigningKeys(store, config, logger, options.now === true),
  },
  {
    name: 'keys list',
    synopsis: '',
    description: 'Every signing key with its state and dates (or the keys of JWKS_FILE).',
    options: [],
    run: ({ store, config, logger }) => listSigningKeys(store, config, logger),
  },
];
