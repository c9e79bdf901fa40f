import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

import { hasControlCharacter } from '../shared/hidden_characters.ts';

const argon2Async = promisify(argon2);

/** The rules a new password must meet, wherever it is set (the CLI, the quickstart, the settings area). */
export const MIN_PASSWORD_LENGTH = 8;

/**
 * The longest password: far more than NIST's 64, and one the sign-in form always carries (its
 * body may be 16 KiB, and a character may take 12 bytes once encoded). A longer one could be set
 * from the command line and then never used to sign in.
 */
export const MAX_PASSWORD_LENGTH = 1024;

/** Why a password will not do, said to the person choosing it; undefined when it will. */
export function passwordProblem(password: string): string | undefined {
  // Characters as a person counts them (code points): an emoji is one, not the two UTF-16 units it takes.
  const characters = [...password].length;
  if (characters < MIN_PASSWORD_LENGTH) return `a password needs at least ${MIN_PASSWORD_LENGTH} characters`;
  if (characters > MAX_PASSWORD_LENGTH) return `a password may have at most ${MAX_PASSWORD_LENGTH} characters`;
  // A line break or another control character cannot be typed into the sign-in form's field.
  if (hasControlCharacter(password)) return 'a password cannot contain a line break, a tab or another control character';
  return undefined;
}

/** OWASP's minimum argon2id profile: 19 MiB, 2 passes, 1 lane. */
const PARAMS = { memory: 19_456, passes: 2, parallelism: 1, tagLength: 32 } as const;
const PHC = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');

/**
 * The password as it is hashed: in Unicode normalization form C (RFC 8265's OpaqueString profile),
 * so "ä" typed as one character or as "a" and a combining mark, as keyboards and systems differ,
 * is the same password.
 */
function normalized(password: string): string {
  return password.normalize('NFC');
}

/** Hashes a password with argon2id into a PHC string (`$argon2id$v=19$m=...,t=...,p=...$salt$hash`). */
export async function hashPassword(password: string): Promise<string> {
  const nonce = randomBytes(16);
  const tag = await argon2Async('argon2id', { message: normalized(password), nonce, ...PARAMS });
  return `$argon2id$v=19$m=${PARAMS.memory},t=${PARAMS.passes},p=${PARAMS.parallelism}$${b64(nonce)}$${b64(tag)}`;
}

export async function verifyPassword(password: string, phc: string): Promise<boolean> {
  if (await verifyExactly(normalized(password), phc)) return true;
  // A password set before passwords were normalized was hashed as it was typed.
  return password !== normalized(password) && verifyExactly(password, phc);
}

async function verifyExactly(password: string, phc: string): Promise<boolean> {
  const match = PHC.exec(phc);
  if (!match) return false;
  const [, memory, passes, parallelism, salt, hash] = match as unknown as [string, string, string, string, string, string];
  const expected = Buffer.from(hash, 'base64');
  const actual = await argon2Async('argon2id', {
    message: password,
    nonce: Buffer.from(salt, 'base64'),
    memory: Number(memory),
    passes: Number(passes),
    parallelism: Number(parallelism),
    tagLength: expected.length,
  });
  return timingSafeEqual(actual, expected);
}

let decoy: Promise<string> | undefined;

/** A hash of a random password, verified against when the account does not exist so both paths take the same time. */
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(16).toString('base64'));
  return decoy;
}
