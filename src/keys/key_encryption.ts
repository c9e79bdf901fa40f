import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';

import { sqliteFile } from '../../adapters/index.ts';
import type { Config } from '../../config/index.ts';
import type { Logger } from '../shared/logger.ts';

/**
 * The key-encryption key (KEK): kept by the operator outside the store, it seals what a copy of
 * the store must not give away (the private signing keys, the cookie keys, and the few secret
 * fields of stored records that cannot be hashed, such as a session id found by its uid).
 * AES-256-GCM; each sealed value names the key that sealed it, so after a rotation values sealed
 * with the previous key still open while new ones are sealed with the current key.
 */

const VERSION = 'kek1';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class KeyEncryptionError extends Error {
  override name = 'KeyEncryptionError';
}

function parseKey(value: string, source: string): Buffer {
  const key = Buffer.from(value.trim(), 'base64url');
  if (key.length !== KEY_BYTES || key.toString('base64url') !== value.trim()) {
    throw new KeyEncryptionError(`${source} must hold ${KEY_BYTES} random bytes in base64url (43 characters), e.g. from: openssl rand 32 | basenc --base64url | tr -d =`);
  }
  return key;
}

/**
 * The key ring the service and the admin CLI seal with: the operator's key (KEY_ENCRYPTION_KEY or
 * KEY_ENCRYPTION_KEY_FILE) with the previous ones; by default, for the embedded store, a key kept
 * in a file beside the database (`oauth.sqlite` -> `oauth.kek`, owner-only), created at first start.
 */
export async function loadKeyRing(config: Config, logger: Logger): Promise<KeyRing> {
  const previous = config.previousKeyEncryptionKeys.map((key, index) => parseKey(key, `KEY_ENCRYPTION_KEY_PREVIOUS entry ${index + 1}`));
  const configured = config.keyEncryptionKey;
  if (configured && 'value' in configured) return new KeyRing(parseKey(configured.value, 'KEY_ENCRYPTION_KEY'), previous);
  if (configured) return new KeyRing(await readKeyFile(configured.file, 'KEY_ENCRYPTION_KEY_FILE'), previous);
  if (config.store === 'memory:') return new KeyRing(randomBytes(KEY_BYTES), previous);
  const database = sqliteFile(config.store);
  if (!database) {
    throw new KeyEncryptionError(`STORE ${config.store.split(':')[0]} needs a key-encryption key kept outside it: set KEY_ENCRYPTION_KEY or KEY_ENCRYPTION_KEY_FILE`);
  }
  return new KeyRing(await defaultKeyFile(`${database.replace(/\.[^./]*$/, '')}.kek`, logger), previous);
}

async function readKeyFile(path: string, source: string): Promise<Buffer> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new KeyEncryptionError(`${source} ${path} cannot be read: ${(error as Error).message}`);
  }
  return parseKey(text, `${source} ${path}`);
}

async function defaultKeyFile(path: string, logger: Logger): Promise<Buffer> {
  try {
    // Exclusive create: when instances start together, one writes and the others read it.
    await writeFile(path, `${randomBytes(KEY_BYTES).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
    logger.warn('created the key-encryption key that seals the signing and cookie keys in the database', {
      file: path,
      advice: 'keep this file out of backups of the database and back it up separately; without it the stored keys cannot be used',
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new KeyEncryptionError(`cannot create the key-encryption key file ${path}: ${(error as Error).message}`);
    if (((await stat(path)).mode & 0o077) !== 0) logger.warn('the key-encryption key file can be read by other users; make it owner-only (chmod 600)', { file: path });
  }
  return readKeyFile(path, 'the key-encryption key file');
}

/** Names a key without revealing it. */
function keyId(key: Buffer): string {
  return createHash('sha256').update('kek-id').update(key).digest('base64url').slice(0, 8);
}

export class KeyRing {
  readonly #current: { id: string; key: Buffer };
  readonly #byId: Map<string, Buffer>;

  /** `current` seals; it and every key in `previous` open. */
  constructor(current: Buffer, previous: Buffer[] = []) {
    this.#current = { id: keyId(current), key: current };
    this.#byId = new Map([current, ...previous].map((key) => [keyId(key), key]));
  }

  seal(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#current.key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return [VERSION, this.#current.id, iv.toString('base64url'), body.toString('base64url')].join('.');
  }

  /** Whether a stored value is sealed with the current key (if not, it is worth sealing again). */
  isSealedWithCurrentKey(value: string): boolean {
    return isSealed(value) && value.split('.')[1] === this.#current.id;
  }

  /**
   * A key for `purpose` derived (HKDF-SHA256) from each key-encryption key, the current one's
   * first: for values the server must recognise later without storing them, and that a copy of the
   * store must not let anyone make.
   */
  derivedKeys(purpose: string): Buffer[] {
    const keys = [this.#current.key, ...[...this.#byId.values()].filter((key) => key !== this.#current.key)];
    return keys.map((key) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), purpose, KEY_BYTES)));
  }

  open(sealed: string): string {
    const [version, id, iv, body] = sealed.split('.');
    if (version !== VERSION || !id || !iv || !body) throw new KeyEncryptionError('not a value sealed with a key-encryption key');
    const key = this.#byId.get(id);
    if (!key) {
      throw new KeyEncryptionError(`a stored value was sealed with a key-encryption key that is not configured (key id ${id}); set it as KEY_ENCRYPTION_KEY or list it in KEY_ENCRYPTION_KEY_PREVIOUS`);
    }
    const bytes = Buffer.from(body, 'base64url');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new KeyEncryptionError(`a stored value sealed with key id ${id} does not open: it was altered`);
    }
  }
}

export function isSealed(value: string): boolean {
  return value.startsWith(`${VERSION}.`);
}
