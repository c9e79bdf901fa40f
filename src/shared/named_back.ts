/**
 * A value someone gave, as a refusal that found nothing by it names it back: `noun value` when the
 * value has the shape of what was asked for, else only its length. A value of another shape may
 * be a secret given in the wrong place (an API key for its id, a password for an email), and a
 * refusal's text ends up where no secret may: a CI log, a terminal's scrollback.
 */
export function namedBack(noun: string, value: string, hasTheShape: boolean): string {
  return hasTheShape ? `${noun} ${value}` : `the ${noun} given (${value.length} characters, not repeated: it does not look like one, and may be a secret)`;
}
