import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';

import type { JWK } from 'jose';

import type { SettingStore } from '../../adapters/store.ts';
import { ConfigError } from '../../config/index.ts';
import { isSealed, type KeyRing } from './key_encryption.ts';
import { engineJwks } from './rotation.ts';
import { nowSeconds } from '../shared/clock.ts';
import { loadKeySet } from './rotation_store.ts';

export interface KeyMaterial {
  /**
   * Private JWKS for the engine: the signing ES256 (access tokens) and RS256 (ID tokens) keys
   * first, then the keys only published and verifying during a rotation (rotation.ts).
   */
  jwks: { keys: JWK[] };
  /** Keys that sign the engine's cookies; the first signs, all verify. */
  cookieKeys: string[];
  /** The operator's key-encryption key (and previous ones): seals these keys and the stored records' secrets. */
  keyRing: KeyRing;
}

/** A JWKS_FILE that will not do: a configuration error. */
export class KeyConfigError extends ConfigError {
  override name = 'KeyConfigError';
}

const COOKIE_KEYS_SETTING = 'cookie_keys';

/**
 * Signing and cookie keys are generated on first start and kept in the store, sealed with the
 * key-encryption key, so a restart keeps every token valid, every instance signs with the same
 * keys, and a copy of the store alone gives neither. The signing keys rotate (rotation.ts);
 * this is the set as of now. An operator may supply a private JWKS file instead (JWKS_FILE),
 * which the service never rotates.
 */
export async function loadKeys(settings: SettingStore, keyRing: KeyRing, jwksFile: string | undefined): Promise<KeyMaterial> {
  const jwks = jwksFile ? await readJwksFile(jwksFile) : engineJwks((await loadKeySet(settings, keyRing)).set, nowSeconds());
  const cookieKeys = await storedOrNew(settings, keyRing, COOKIE_KEYS_SETTING, async () => [randomBytes(32).toString('base64url')]);
  return { jwks, cookieKeys, keyRing };
}

/**
 * Whether a service (or quickstart) has started on the store: the first start stores the cookie
 * keys, whatever signs the tokens. A store without them is one no service reads.
 */
export async function holdsServiceKeys(settings: SettingStore): Promise<boolean> {
  return await settings.get(COOKIE_KEYS_SETTING) !== undefined;
}

async function storedOrNew<T>(settings: SettingStore, keyRing: KeyRing, name: string, create: () => Promise<T>): Promise<T> {
  // Two instances starting at once may both generate; setIfAbsent keeps the first and both use it.
  const stored = await settings.get(name) ?? await settings.setIfAbsent(name, keyRing.seal(JSON.stringify(await create())));
  // Stored in the clear by an earlier version, or sealed with a key-encryption key since rotated: seal it anew.
  const plain = isSealed(stored) ? keyRing.open(stored) : stored;
  if (!keyRing.isSealedWithCurrentKey(stored)) await settings.put(name, keyRing.seal(plain));
  return JSON.parse(plain) as T;
}

/** Refuses a key the engine would refuse later with a stack trace: it is read as Node's crypto reads a JWK. */
function assertUsableKey(path: string, key: unknown, position: number): void {
  if (typeof key !== 'object' || key === null || Array.isArray(key) || typeof (key as JWK).kty !== 'string') {
    throw new KeyConfigError(`JWKS_FILE ${path}: key ${position} is not a JSON Web Key (an object with kty)`);
  }
  const jwk = key as JWK & { kty: string };
  try {
    if (jwk.d === undefined) createPublicKey({ key: jwk, format: 'jwk' });
    else createPrivateKey({ key: jwk, format: 'jwk' });
  } catch (error) {
    throw new KeyConfigError(`JWKS_FILE ${path}: key ${position} (${jwk.kty}) is not a usable JSON Web Key: ${(error as Error).message}`);
  }
}

/** Algorithms of each key type that a JWKS_FILE key may name. */
const ALGORITHMS_OF_KEY_TYPE: Record<string, RegExp> = { EC: /^ES(256|384|512)$/, RSA: /^(RS|PS)(256|384|512)$/, OKP: /^(EdDSA|Ed25519)$/ };

/** RFC 7518 section 3.3: an RSA key used with RS256 or PS256 is 2048 bits or larger. */
const MIN_RSA_MODULUS_BYTES = 256;

/**
 * Refuses a key set the engine would refuse later with a stack trace (two keys with one kid, a key
 * for encryption, an algorithm not of its key type), and an RSA key RFC 7518 forbids, whose ID
 * tokens stock verifiers would refuse.
 */
function assertSigningKeySet(path: string, keys: JWK[]): void {
  const kids = keys.map((key) => key.kid).filter((kid) => kid !== undefined);
  if (new Set(kids).size !== kids.length) throw new KeyConfigError(`JWKS_FILE ${path}: two keys have the same kid; give each its own`);
  keys.forEach((key, index) => {
    const position = index + 1;
    if (key.use !== undefined && key.use !== 'sig') {
      throw new KeyConfigError(`JWKS_FILE ${path}: key ${position} is for use "${key.use}"; the service signs with its keys (use "sig", or no use)`);
    }
    if (key.alg !== undefined && !ALGORITHMS_OF_KEY_TYPE[key.kty ?? '']?.test(key.alg)) {
      throw new KeyConfigError(`JWKS_FILE ${path}: key ${position} (${key.kty}) names alg "${key.alg}", which is no algorithm of its key type`);
    }
    if (key.kty === 'RSA' && Buffer.from(key.n ?? '', 'base64url').length < MIN_RSA_MODULUS_BYTES) {
      throw new KeyConfigError(`JWKS_FILE ${path}: key ${position} (RSA) is shorter than 2048 bits (RFC 7518 section 3.3)`);
    }
  });
}

export async function readJwksFile(path: string): Promise<{ keys: JWK[] }> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    // One line, as every configuration error: JSON.parse quotes the text it stopped at, line breaks included.
    throw new KeyConfigError(`JWKS_FILE ${path} cannot be read as JSON: ${(error as Error).message.replace(/\s+/g, ' ')}`);
  }
  const keys = typeof parsed === 'object' && parsed !== null ? (parsed as { keys?: unknown }).keys : undefined;
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new KeyConfigError(`JWKS_FILE ${path} must be a JSON Web Key Set with at least one key`);
  }
  keys.forEach((key: unknown, index) => assertUsableKey(path, key, index + 1));
  const typed = keys as JWK[];
  assertSigningKeySet(path, typed);
  if (!typed.some((key) => key.kty === 'EC' && key.crv === 'P-256' && key.d)) {
    throw new KeyConfigError(`JWKS_FILE ${path} needs a private P-256 (ES256) key to sign access tokens`);
  }
  if (!typed.some((key) => key.kty === 'RSA' && key.d)) {
    throw new KeyConfigError(`JWKS_FILE ${path} needs a private RSA key to sign ID tokens (RS256)`);
  }
  return { keys: typed };
}
