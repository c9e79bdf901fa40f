import { createCipheriv, createDecipheriv, createHash, createSecretKey, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

import { ConfigError, type Config, type KeyEncryptionKeySource } from '../../config/index.ts';
import { makeDirectories } from '../shared/directories.ts';
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

/** A key-encryption key that will not do, or that opens nothing stored: the operator's to change, as a setting. */
export class KeyEncryptionError extends ConfigError {
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
 * in a file outside the data directory (config/index.ts says where), created at first start.
 */
export async function loadKeyRing(config: Config, logger: Logger): Promise<KeyRing> {
  const previous = config.previousKeyEncryptionKeys.map((key, index) => parseKey(key, `KEY_ENCRYPTION_KEY_PREVIOUS entry ${index + 1}`));
  const source = config.keyEncryptionKey;
  if (source && 'value' in source) return new KeyRing(parseKey(source.value, 'KEY_ENCRYPTION_KEY'), previous, { from: 'KEY_ENCRYPTION_KEY' });
  if (source && 'file' in source) {
    const key = await readKeyFile(source.file, 'KEY_ENCRYPTION_KEY_FILE');
    await warnIfShared(source.file, logger);
    return new KeyRing(key, previous, { from: `KEY_ENCRYPTION_KEY_FILE ${source.file}` });
  }
  if (source) {
    const { key, createdNow, file } = await defaultKey(source, new URL(config.issuer).protocol === 'https:', logger);
    return new KeyRing(key, previous, createdNow ? { from: `the key file ${file}`, createdFile: file } : { from: `the key file ${file}` });
  }
  if (config.store === 'memory:') return new KeyRing(randomBytes(KEY_BYTES), previous);
  throw new KeyEncryptionError(`STORE ${config.store.split(':')[0]} needs a key-encryption key kept outside it: set KEY_ENCRYPTION_KEY or KEY_ENCRYPTION_KEY_FILE`);
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

/**
 * The embedded store's key when the operator gave none. A deployment on https must name its key,
 * so that where the key lives (and is backed up) is the operator's decision; one whose key an
 * earlier version made beside the database is told how to keep using it (name it, once moved). In
 * development, a key beside the database is still read, with a warning at every start (a copy of
 * the data directory takes it along); otherwise a key file under the user's configuration directory.
 */
async function defaultKey({ created, besideDatabase }: Extract<KeyEncryptionKeySource, { created: string }>, https: boolean, logger: Logger): Promise<{ key: Buffer; createdNow: boolean; file: string }> {
  if (https && await exists(besideDatabase)) {
    throw new KeyEncryptionError(`BASE_URL is https, so the key-encryption key must be given, and the one found beside the database (${besideDatabase}) goes along with every copy of the data directory: move it out of the data directory and set KEY_ENCRYPTION_KEY_FILE to its new path`);
  }
  if (await exists(besideDatabase)) {
    logger.warn('the key-encryption key is kept beside the database, so a copy of the data directory can open the stored keys; move the file out of the data directory and set KEY_ENCRYPTION_KEY_FILE to its new path', {
      file: besideDatabase,
    });
    // Read first: a file that cannot be read is refused in words before its mode is looked at.
    const key = await readKeyFile(besideDatabase, 'the key-encryption key file');
    await warnIfShared(besideDatabase, logger);
    return { key, createdNow: false, file: besideDatabase };
  }
  if (https) {
    throw new KeyEncryptionError('BASE_URL is https, so the key-encryption key must be given: set KEY_ENCRYPTION_KEY_FILE (or KEY_ENCRYPTION_KEY) to a key kept apart from the store and its backups; make one with: openssl rand 32 | basenc --base64url | tr -d =');
  }
  let createdNow = false;
  try {
    makeDirectories(dirname(created), 0o700);
    // Exclusive create: when instances start together, one writes and the others read it.
    await writeFile(created, `${randomBytes(KEY_BYTES).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
    createdNow = true;
    logger.warn('created the key-encryption key that seals the signing and cookie keys in the database, outside the data directory', {
      file: created,
      advice: 'back this file up separately from the database; without it the stored keys cannot be used',
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new KeyEncryptionError(`KEY_ENCRYPTION_KEY_FILE is not set, and the key-encryption key file cannot be created at ${created} (${(error as Error).message}): set KEY_ENCRYPTION_KEY_FILE, or XDG_CONFIG_HOME to a directory this user can write`);
    }
    await warnIfShared(created, logger);
  }
  return { key: await readKeyFile(created, 'the key-encryption key file'), createdNow, file: created };
}

/**
 * Whether a file is there; one that cannot be looked at counts as there, so that reading it says
 * why it cannot be read. A path through a file (ENOTDIR) has nothing at its end.
 */
async function exists(path: string): Promise<boolean> {
  return stat(path).then(() => true, (error: NodeJS.ErrnoException) => error.code !== 'ENOENT' && error.code !== 'ENOTDIR');
}

/**
 * A key file other users may read is used (a secret mounted by an orchestrator often is so), and
 * said at every start: whoever can read it can open every key the store holds.
 */
async function warnIfShared(path: string, logger: Logger): Promise<void> {
  const { mode } = await stat(path);
  if ((mode & 0o077) !== 0) {
    logger.warn('the key-encryption key file can be read by other users; make it owner-only (chmod 600)', { file: path, mode: `0${(mode & 0o777).toString(8)}` });
  }
}

/** Names a key without revealing it. */
function keyId(key: Buffer): string {
  return createHash('sha256').update('kek-id').update(key).digest('base64url').slice(0, 8);
}

/** A key-encryption key: its bytes (to name it and derive from it) and, for the cipher, its key object (a raw buffer is checked again at every use). */
interface RingKey {
  bytes: Buffer;
  cipherKey: KeyObject;
}

/** Where the ring's current key came from, for the errors that need the operator to find it. */
export interface KeyOrigin {
  /** The setting or file it was read from (`KEY_ENCRYPTION_KEY`, `KEY_ENCRYPTION_KEY_FILE /path`, `the key file /path`). */
  from?: string;
  /** The default key file, when this start created it (there was none): a store sealed before holds keys it cannot open. */
  createdFile?: string;
}

export class KeyRing {
  readonly #current: { id: string; key: RingKey };
  readonly #byId: Map<string, RingKey>;
  readonly #origin: KeyOrigin;

  /** `current` seals; it and every key in `previous` open. */
  constructor(current: Buffer, previous: Buffer[] = [], origin: KeyOrigin = {}) {
    this.#origin = origin;
    const ringKey = (bytes: Buffer): RingKey => ({ bytes, cipherKey: createSecretKey(bytes) });
    this.#current = { id: keyId(current), key: ringKey(current) };
    this.#byId = new Map([current, ...previous].map((key) => [keyId(key), ringKey(key)]));
    this.#byId.set(this.#current.id, this.#current.key);
  }

  /** The default key file, when this start created it; undefined otherwise. */
  get createdFile(): string | undefined {
    return this.#origin.createdFile;
  }

  seal(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#current.key.cipherKey, iv);
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
    return keys.map(({ bytes }) => Buffer.from(hkdfSync('sha256', bytes, Buffer.alloc(0), purpose, KEY_BYTES)));
  }

  /** What open() gives, or undefined when no key of the ring opens the value: its key was dropped from the ring, or it was altered. */
  openIfKnown(sealed: string): string | undefined {
    try {
      return this.open(sealed);
    } catch (error) {
      if (error instanceof KeyEncryptionError) return undefined;
      throw error;
    }
  }

  open(sealed: string): string {
    const [version, id, iv, body] = sealed.split('.');
    if (version !== VERSION || !id || !iv || !body) throw new KeyEncryptionError('not a value sealed with a key-encryption key');
    const key = this.#byId.get(id);
    if (!key && this.#origin.createdFile) {
      throw new KeyEncryptionError(`a stored value was sealed with a key-encryption key that is not configured (key id ${id}): ${this.#origin.createdFile} did not exist, so this start made a new key there; put the key that sealed the store in its place (it is under the configuration directory of the user, or the XDG_CONFIG_HOME, the service first ran with, or in a backup), or name it with KEY_ENCRYPTION_KEY_FILE`);
    }
    if (!key) {
      // The key in use was found, and is not the one: say where it was read, which is where to look.
      const inUse = this.#origin.from ? `; the key in use is from ${this.#origin.from}, which did not seal it` : '';
      throw new KeyEncryptionError(`a stored value was sealed with a key-encryption key that is not configured (key id ${id})${inUse}; give the one that did as KEY_ENCRYPTION_KEY or KEY_ENCRYPTION_KEY_FILE, or list it in KEY_ENCRYPTION_KEY_PREVIOUS`);
    }
    const bytes = Buffer.from(body, 'base64url');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.cipherKey, Buffer.from(iv, 'base64url'));
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
