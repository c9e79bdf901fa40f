/**
 * The characters that change the direction text is shown in: explicit embeddings, overrides and
 * isolates, and the invisible direction marks. In a name shown to someone deciding something (an
 * application's on the consent page, a workspace's) they can make it read as another.
 */
export const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/gu;

/** Whether `text` holds one of them. */
export function hasBidiControl(text: string): boolean {
  return text.search(BIDI_CONTROLS) !== -1;
}
