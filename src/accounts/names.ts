import { hasBidiControl, hasInvisibleCharacter } from '../shared/hidden_characters.ts';

/**
 * Whether a text holds a line break, a tab or another control character: none can be typed into
 * the pages' one-line fields, and a name holding one would break the lines it is shown on (the
 * admin CLI's lists, a log line) or pass for more than one.
 */
export function hasControlCharacter(text: string): boolean {
  // The line and paragraph separators break a line as a line feed does.
  return /[\p{Cc}\u2028\u2029]/u.test(text);
}

/** Why a workspace's or a person's name will not do, said to whoever chose it; undefined when it will. */
export function nameProblem(of: 'a workspace' | 'a user', name: string): string | undefined {
  if (!name.trim()) return `${of} needs a name`;
  return namePartProblem(`${of}'s name`, name);
}

/** Why an optional part of a name (a person's given or family name) will not do; undefined when it will. */
export function namePartProblem(what: string, name: string): string | undefined {
  if (hasControlCharacter(name)) return `${what} cannot contain a line break, a tab or another control character`;
  if (hasBidiControl(name)) return `${what} cannot contain a character that changes the direction text is shown in`;
  if (hasInvisibleCharacter(name)) return `${what} cannot contain an invisible character (a zero-width space, a word joiner, a soft hyphen, ...)`;
  return undefined;
}
