import { hash, randomBytes } from 'node:crypto';

import type { ModelStore } from '../../adapters/store.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';

const FORM_ID = /^[A-Za-z0-9_-]{22}$/;

/** The id a form is shown with (a hidden field): a create form shown makes at most one thing, a confirmation is answered once. */
export function newFormId(): string {
  return randomBytes(16).toString('base64url');
}

/** The id the form was shown with, or undefined for a form without one (shown by an earlier version). */
export function formIdOf(body: Record<string, unknown>): string | undefined {
  return typeof body.form_id === 'string' && FORM_ID.test(body.form_id) ? body.form_id : undefined;
}

/**
 * How long a create form's mark of use stays: as long as the form can be sent at all (its token
 * is its browser session's), so a reload of the page that showed what it made makes nothing however late.
 */
const MARK_SECONDS = LIFETIMES.Session;

/** A create form's claim, `release`d when nothing was made (the form may be sent again, corrected); or why it is refused. */
export type CreateFormClaim = { claimed: { release(): Promise<void> } } | { refused: 'out_of_date' | 'sent_before' };

/**
 * The create forms of a workspace's settings pages (a new API key, a new invitation link), each
 * sent once: the first sending of a form shown claims its id with the store's atomic insert, so a
 * second (a reload of the page that showed the secret, a restored tab, a double submit's copy) is
 * refused on every instance. `kind` names the form (`api-key`, `invitation`).
 */
export class CreateForms {
  readonly #marks: ModelStore;
  readonly #kind: string;
  readonly #payloadKind: string;

  constructor(marks: ModelStore, kind: string, payloadKind: string) {
    this.#marks = marks;
    this.#kind = kind;
    this.#payloadKind = payloadKind;
  }

  async claim(workspaceId: string, body: Record<string, unknown>): Promise<CreateFormClaim> {
    const formId = formIdOf(body);
    if (!formId) return { refused: 'out_of_date' };
    const mark = hash('sha256', `${this.#kind}-form\n${workspaceId}\n${formId}`, 'base64url');
    if (!await this.#marks.insertNew(mark, { kind: this.#payloadKind }, MARK_SECONDS)) return { refused: 'sent_before' };
    return { claimed: { release: () => this.#marks.destroy(mark) } };
  }
}
