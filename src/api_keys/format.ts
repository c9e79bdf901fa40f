import { randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * How an API key looks: `wsk_`, 32 random base62 characters (190 bits), then a 6-character
 * base62 CRC32 of what precedes it. The fixed prefix lets secret scanners find a leaked key and
 * tells the data API which kind of credential it holds; the checksum refuses a mistyped or
 * truncated key without a store read (the scheme GitHub's tokens use).
 */
export const API_KEY_PREFIX = 'wsk_';
const SECRET_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SHAPE = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${SECRET_LENGTH + CHECKSUM_LENGTH}}$`);
/** Characters of a key shown in lists: the prefix and four of the secret, too few to matter. */
const HINT_LENGTH = API_KEY_PREFIX.length + 4;

export function generateApiKey(): string {
  let secret = '';
  for (let i = 0; i < SECRET_LENGTH; i += 1) secret += BASE62[randomInt(BASE62.length)];
  const body = `${API_KEY_PREFIX}${secret}`;
  return `${body}${checksum(body)}`;
}

/** Claims to be an API key (it carries the prefix), whether or not it is a well-formed one. */
export function looksLikeApiKey(credential: string): boolean {
  return credential.startsWith(API_KEY_PREFIX);
}

/** Has the shape of a key this server generates and a checksum that matches. */
export function isWellFormedApiKey(credential: string): boolean {
  if (!SHAPE.test(credential)) return false;
  const body = credential.slice(0, -CHECKSUM_LENGTH);
  return checksum(body) === credential.slice(-CHECKSUM_LENGTH);
}

export function apiKeyHint(key: string): string {
  return key.slice(0, HINT_LENGTH);
}

function checksum(body: string): string {
  let value = crc32(body);
  let digits = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i += 1) {
    digits = BASE62[value % 62] + digits;
    value = Math.floor(value / 62);
  }
  return digits;
}
