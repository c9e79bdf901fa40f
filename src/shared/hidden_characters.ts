/**
 * The characters that change the direction text is shown in: explicit embeddings, overrides and
 * isolates, and the invisible direction marks. In a name shown to someone deciding something (an
 * application's on the consent page, a workspace's) they can make it read as another.
 */
const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/gu;

/**
 * The characters that show nothing at all and that no script needs inside a name: the zero-width
 * space, word joiner and invisible operators, the byte order mark, the soft hyphen, the Mongolian
 * vowel separator, and the Hangul fillers. They make two names that read alike compare different,
 * or a name that reads as nothing. The zero-width joiner and non-joiner are not among them: Persian,
 * the Indic scripts and emoji sequences need them.
 */
const INVISIBLE_CHARACTERS = /[\u00AD\u115F\u1160\u180E\u200B\u2060-\u2064\u3164\uFEFF\uFFA0]/gu;

/** Whether `text` holds a character that changes the direction text is shown in. */
export function hasBidiControl(text: string): boolean {
  return text.search(BIDI_CONTROLS) !== -1;
}

/** Whether `text` holds a character that shows nothing. */
export function hasInvisibleCharacter(text: string): boolean {
  return text.search(INVISIBLE_CHARACTERS) !== -1;
}

/** `text` without the characters above, as it reads. */
export function withoutHiddenCharacters(text: string): string {
  return text.replace(BIDI_CONTROLS, '').replace(INVISIBLE_CHARACTERS, '');
}

/**
 * Combining marks at most on one character. Scripts that stack them need a few (Vietnamese two,
 * Thai three, pointed Hebrew four); dozens on one letter ("Zalgo" text) draw over the lines above
 * and below, so a name could cover the warning beside it on the consent page.
 */
export const STACKED_MARKS_MAX = 6;
const STACKED_MARKS = new RegExp(`\\p{M}{${STACKED_MARKS_MAX + 1}}`, 'u');

/** Whether `text` stacks more than STACKED_MARKS_MAX combining marks on one character. */
export function hasStackedMarks(text: string): boolean {
  return STACKED_MARKS.test(text);
}

/**
 * Whether a text holds a line break, a tab or another control character: none can be typed into
 * the pages' one-line fields, and a name holding one would break the lines it is shown on (the
 * admin CLI's lists, a log line) or pass for more than one.
 */
export function hasControlCharacter(text: string): boolean {
  // The line and paragraph separators break a line as a line feed does.
  return /[\p{Cc}\u2028\u2029]/u.test(text);
}

/**
 * What draws nothing where it stands alone: white space, control and format characters, every code
 * point Unicode says to show nothing for unless it is supported (Default_Ignorable_Code_Point: the
 * joiners, variation selectors, tags, fillers and the code points kept for more of them), and the
 * blank Braille pattern.
 */
const DRAWS_NOTHING = /^[\p{White_Space}\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\u2800]*$/u;

/** Whether `text` shows nothing at all: made only of characters that draw nothing (the joiners included, which need a character to join). */
export function showsNothing(text: string): boolean {
  return DRAWS_NOTHING.test(text);
}
