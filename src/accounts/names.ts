import { hasBidiControl, hasControlCharacter, hasInvisibleCharacter, hasStackedMarks, STACKED_MARKS_MAX } from '../shared/hidden_characters.ts';

/**
 * The most characters a workspace's or a person's name (or part of one) may have: more than any
 * real one, and few enough for the lines of a list and the claims of a token it is shown in.
 */
export const MAX_NAME_LENGTH = 200;

/** Why a workspace's or a person's name will not do, said to whoever chose it; undefined when it will. */
export function nameProblem(of: 'a workspace' | 'a user', name: string): string | undefined {
  if (!name.trim()) return `${of} needs a name`;
  return namePartProblem(`${of}'s name`, name);
}

/** Why an optional part of a name (a person's given or family name) will not do; undefined when it will. */
export function namePartProblem(what: string, name: string): string | undefined {
  if ([...name.trim()].length > MAX_NAME_LENGTH) return `${what} may have at most ${MAX_NAME_LENGTH} characters`;
  if (hasControlCharacter(name)) return `${what} cannot contain a line break, a tab or another control character`;
  if (hasBidiControl(name)) return `${what} cannot contain a character that changes the direction text is shown in`;
  if (hasInvisibleCharacter(name)) return `${what} cannot contain an invisible character (a zero-width space, a word joiner, a soft hyphen, ...)`;
  if (hasStackedMarks(name)) return `${what} cannot stack more than ${STACKED_MARKS_MAX} accents or other combining marks on one character`;
  return undefined;
}

/** RFC 5321's limits: a mailbox of at most 254 characters, its local part of at most 64. */
const MAX_EMAIL_LENGTH = 254;
const MAX_LOCAL_PART_LENGTH = 64;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Whether a value has the shape of an email address (whether or not anyone's). */
export function looksLikeEmail(value: string): boolean {
  return EMAIL.test(value.trim());
}

/**
 * Why an email address will not do for a new user (once trimmed), said to whoever gave it;
 * undefined when it will. One that holds a hidden character would be shown as another user's.
 */
export function emailProblem(email: string): string | undefined {
  const trimmed = email.trim();
  if (!EMAIL.test(trimmed)) return `${JSON.stringify(trimmed)} is not an email address`;
  if (trimmed.length > MAX_EMAIL_LENGTH) return `an email address may have at most ${MAX_EMAIL_LENGTH} characters`;
  if (trimmed.lastIndexOf('@') > MAX_LOCAL_PART_LENGTH) return `an email address may have at most ${MAX_LOCAL_PART_LENGTH} characters before its @`;
  if (hasControlCharacter(trimmed) || hasBidiControl(trimmed) || hasInvisibleCharacter(trimmed)) return 'an email address cannot contain a control, direction-changing or invisible character';
  return undefined;
}
