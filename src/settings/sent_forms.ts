import { hash } from 'node:crypto';

import type { ModelStore } from '../../adapters/store.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { formIdOf } from './form_ids.ts';

/** As long as a confirmation form can be sent at all (its token is its browser session's). */
const MARK_SECONDS = LIFETIMES.Session;

/**
 * The confirmation forms whose change was made, each by the id it was shown with (a hidden
 * `form_id`, as the create-key form's): the same form sent again (a double click without
 * JavaScript, a retry, a restored tab) finds the change made and is answered as the first sending
 * was, not refused because what it names is gone or already so. Marked once the change is made,
 * in the store (ReplayDetection records), so every instance knows it.
 */
export class SentForms {
  readonly #marks: ModelStore;

  constructor(marks: ModelStore) {
    this.#marks = marks;
  }

  /** Where the first sending of this form sent the browser, once its change was made; undefined for a form not sent before (or shown without an id). */
  async answerOf(userId: string, path: string, body: Record<string, unknown>): Promise<string | undefined> {
    const id = markId(userId, path, body);
    const mark = id === undefined ? undefined : await this.#marks.find(id);
    return typeof mark?.location === 'string' ? mark.location : undefined;
  }

  /** Records that this form's change was made, and where its answer sends the browser. */
  async record(userId: string, path: string, body: Record<string, unknown>, location: string): Promise<void> {
    const id = markId(userId, path, body);
    if (id !== undefined) await this.#marks.upsert(id, { kind: 'SettingsForm', location }, MARK_SECONDS);
  }
}

/** Bound to the user and the form's address too, so a form id copied elsewhere finds nothing. */
function markId(userId: string, path: string, body: Record<string, unknown>): string | undefined {
  const formId = formIdOf(body);
  return formId === undefined ? undefined : hash('sha256', `settings-form\n${userId}\n${path}\n${formId}`, 'base64url');
}
