import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';

import { hasControlCharacter } from '../shared/hidden_characters.ts';

const argon2Async = promisify(argon2);

/** The rules a new password must meet, wherever it is set (the CLI, the quickstart, the settings area). */
export const MIN_PASSWORD_LENGTH = 8;

/**
 * The longest password, in code points once composed (NFC): far more than NIST's 64, and one the
 * sign-in form always carries (its body may be 16 KiB, and a code point takes at most 12 bytes
 * once form-encoded). A longer one could be set from the command line and then never used to sign
 * in. This bound is about bytes, so it counts code points, not the characters a person sees (one
 * of those may hold any number of combining marks).
 */
export const MAX_PASSWORD_LENGTH = 1024;

/**
 * What is known of the person a password is for: their email address, their names, and the names
 * of the service and the workspaces they sign in to. An attacker guesses these first, so a
 * password cannot be one of them (NIST SP 800-63B, section 3.1.1.2: context-specific words).
 */
export interface PasswordContext {
  email?: string;
  /** The user's name, and their given and family names where known. */
  names?: readonly (string | undefined)[];
  /** SERVICE_NAME, and other names of the service. */
  serviceNames?: readonly (string | undefined)[];
  /** The names of the workspaces the user belongs to, or is being made a member of. */
  workspaceNames?: readonly string[];
  /** The workspace named is one the user is creating (the quickstart's), not one they belong to: said so to the user. */
  creatingWorkspace?: boolean;
  /**
   * Who is told why a password will not do: an operator (the CLI's user commands), of whom it
   * speaks as "the user"; or the user themselves (the settings area, the quickstart's questions),
   * to whom it says "your email address" and "your name".
   */
  told?: 'operator' | 'user';
  /**
   * In what form: a clause the caller ends ("error: ...", "...; try again"), or sentences of their
   * own (a page's field). By default a clause for an operator and sentences for the user.
   */
  form?: 'clause' | 'sentences';
}

/** The product's own word, refused as the service's name is, whatever SERVICE_NAME says. */
const PRODUCT_WORDS = ['workspace'];

/** What a refusal of a guessable password says after why: that it matters, and what to do instead. */
const WHY = 'which attackers try first';
const INSTEAD = 'a few unrelated words make a strong one';

/**
 * Why a password will not do, said to the person choosing it; undefined when it will. Only a new
 * password is checked: one set before a rule was added still signs in.
 */
export function passwordProblem(password: string, context: PasswordContext = {}): string | undefined {
  const unusable = unusableProblem(normalized(password));
  if (unusable !== undefined) return inSentences(context) ? sentence(unusable) : unusable;
  return guessableProblem(password, context);
}

function inSentences({ told, form }: PasswordContext): boolean {
  return (form ?? (told === 'user' ? 'sentences' : 'clause')) === 'sentences';
}

/** A clause as a sentence of its own: "A password needs ...". */
function sentence(clause: string): string {
  return `${clause.charAt(0).toUpperCase()}${clause.slice(1)}.`;
}

const graphemes = new Intl.Segmenter('en', { granularity: 'grapheme' });

/**
 * The length rules, counted as the password is hashed (NFC). The minimum counts the characters a
 * person sees (grapheme clusters): an emoji is one, a flag one, "é" one however it was typed. The
 * maximum counts code points (see MAX_PASSWORD_LENGTH).
 */
function unusableProblem(composed: string): string | undefined {
  if ([...graphemes.segment(composed)].length < MIN_PASSWORD_LENGTH) return `a password needs at least ${MIN_PASSWORD_LENGTH} characters`;
  if ([...composed].length > MAX_PASSWORD_LENGTH) return `a password may have at most ${MAX_PASSWORD_LENGTH} characters`;
  // A line break or another control character cannot be typed into the sign-in form's field.
  if (hasControlCharacter(composed)) return 'a password cannot contain a line break, a tab or another control character';
  return undefined;
}

/**
 * The blocklist NIST SP 800-63B asks for (section 3.1.1.2), and no composition rule (it advises
 * against them). A password is compared as it is hashed (composed: NFC), ignoring case, in the
 * forms an attacker's guesses take (formsOf): also without its spaces, punctuation and symbols
 * ("Pass word!" is "password"), with the commonest substitutions undone ("pa$$w0rd" is
 * "password"), and without the digits that end it ("monkey1984", "Dragon1!").
 */
function guessableProblem(password: string, context: PasswordContext): string | undefined {
  const typed = folded(password);
  const forms = formsOf(typed);
  const withDigitsRemoved = [...new Set([typed, compact(typed)].map(withoutTrailingDigits).filter((base) => base !== undefined).flatMap(formsOf))];
  const both = [...new Set([...forms, ...withDigitsRemoved])];
  const user = context.told === 'user';
  const sentences = inSentences(context);

  const isWordOf = (texts: readonly (string | undefined)[]) => {
    const words = new Set(texts.flatMap((text) => (text === undefined ? [] : wordsOf(text))));
    return both.some((form) => words.has(form));
  };
  // One clause the CLI ends, or sentences.
  const guessable = (why: string) => (sentences ? `${sentence(`${why}, ${WHY}`)} Choose another: ${INSTEAD}.` : `${why}, ${WHY}: choose another (${INSTEAD})`);
  if (context.email !== undefined && isWordOf([context.email])) return guessable(`a password cannot be ${user ? 'your' : 'the'} email address or a part of it`);
  if (context.names && isWordOf(context.names)) return guessable(`a password cannot be ${user ? 'your' : 'the user\'s'} name or a part of it`);
  if (isWordOf([...context.serviceNames ?? [], ...context.workspaceNames ?? [], ...PRODUCT_WORDS])) {
    const workspace = !user ? 'the workspace' : context.creatingWorkspace ? 'the workspace you are creating' : 'a workspace you belong to';
    return guessable(`a password cannot be the name of the service or of ${workspace}`);
  }

  // Four characters at least: fewer are no run, and "ab" is not "a few repeated".
  const patterned = both.filter((form) => [...form].length >= 4);
  if (patterned.some(isRepeated)) return guessable('a password cannot be one character or a few repeated (aaaaaaaa, abcabcab)');
  if (patterned.some(isRun)) return guessable('a password cannot be a run of consecutive characters (12345678, abcdefgh)');
  const common = commonPasswords();
  if (forms.some((form) => common.has(form))) return guessable('this password is one of the most commonly used ones');
  if (withDigitsRemoved.some((form) => common.has(form))) return guessable('this password is one of the most commonly used ones with a few digits added');
  return undefined;
}

/** As a password is hashed (NFC), in lower case. */
function folded(text: string): string {
  return normalized(text).toLowerCase();
}

/** Letters and digits alone: no spaces, punctuation or symbols. */
function compact(text: string): string {
  return text.replace(/[^\p{L}\p{N}]+/gu, '');
}

/**
 * The commonest substitutions of a letter by a digit or symbol, undone ("p@$$w0rd": "password").
 * A "1" is an "i" or an "l": both are tried. Each character is replaced the one way, so a password
 * has at most two such forms (not every combination).
 */
const SUBSTITUTIONS: Record<string, string> = { '@': 'a', '$': 's', '0': 'o', '3': 'e', '4': 'a', '5': 's', '7': 't', '!': 'i' };

function substitutionsUndone(text: string): string[] {
  const undone = text.replace(/[@$03457!]/gu, (character) => SUBSTITUTIONS[character]!);
  return [...new Set([undone.replaceAll('1', 'i'), undone.replaceAll('1', 'l')])];
}

/** A folded password as guesses are made of it: as typed, without its spaces and punctuation, and both with the substitutions undone. */
function formsOf(text: string): string[] {
  return [...new Set([text, ...substitutionsUndone(text)].flatMap((form) => [form, compact(form)]))].filter((form) => form !== '');
}

/**
 * A text as guesses are made from it: whole, each side of an `@` (an email's local part), each
 * without its spaces and punctuation, and each of its words ("ada.lovelace@example.com":
 * "ada.lovelace", "adalovelace", "ada", "lovelace", "example").
 */
function wordsOf(text: string): string[] {
  const whole = folded(text.trim());
  const pieces = [whole, ...whole.split('@')];
  return [...new Set([...pieces, ...pieces.map(compact), ...whole.split(/[^\p{L}\p{N}]+/u)])].filter((word) => word !== '');
}

/** The password without the 1 to 4 digits that end it (a year, "1", "123"), when 4 characters or more remain; otherwise undefined. */
function withoutTrailingDigits(form: string): string | undefined {
  const base = form.replace(/[0-9]{1,4}$/u, '');
  return base !== form && [...base].length >= 4 ? base : undefined;
}

/** One character, or a group of up to 4, repeated throughout, at least twice: "aaaaaaaa", "abababab", "abcabcab". */
function isRepeated(form: string): boolean {
  const points = [...form];
  for (let period = 1; period <= 4 && period * 2 <= points.length; period += 1) {
    if (points.every((point, index) => index < period || point === points[index - period])) return true;
  }
  return false;
}

/** Each character the one after (or before) the last: "12345678", "abcdefgh", "87654321". */
function isRun(form: string): boolean {
  const points = [...form].map((point) => point.codePointAt(0)!);
  const step = points[1]! - points[0]!;
  return Math.abs(step) === 1 && points.every((point, index) => index === 0 || point - points[index - 1]! === step);
}

let common: ReadonlySet<string> | undefined;

/**
 * The 49,000 passwords zxcvbn-ts (@zxcvbn-ts/language-common, MIT) finds most used in password
 * leaks, in lower case, those of 4 characters or more. Read when a password is first checked, not
 * at start: the service rarely sets one, and the list takes some 50 ms and 4 MB to load.
 */
function commonPasswords(): ReadonlySet<string> {
  if (!common) {
    const { dictionary } = createRequire(import.meta.url)('@zxcvbn-ts/language-common') as typeof import('@zxcvbn-ts/language-common');
    common = new Set(dictionary['passwords-common'].map(folded).filter((entry) => [...entry].length >= 4));
  }
  return common;
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
