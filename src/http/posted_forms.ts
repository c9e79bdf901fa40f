import { randomBytes } from 'node:crypto';

import type { ModelStore } from '../../adapters/store.ts';
import type { KeyRing } from '../keys/key_encryption.ts';
import { digest } from '../shared/digest.ts';

/**
 * Long enough for a browser to follow the 303 it was just given, on any connection; a handle in
 * a browser's history is of no use after it.
 */
export const POSTED_FORM_SECONDS = 60;

/** The store model the forms are parked under. */
export const POSTED_FORM_MODEL = 'PostedForm';

/** A form taken for one GET: given back if that GET could not be answered, so a reload finds it. */
export interface TakenForm {
  /** The form's urlencoded text. */
  form: string;
  /** The GET was answered: the form is deleted (best effort: it cannot be taken again anyway, and it expires). */
  done(): Promise<void>;
  /** The GET failed (an outage, a 5xx): the form can be taken again, until it expires. */
  giveBack(): Promise<void>;
}

/**
 * Forms posted to an endpoint the engine serves by GET, kept for the one GET that follows the
 * 303 (src/http/form_post_as_get.ts), so that neither the URL nor the browser's history holds what
 * a client posted to keep it out of them (a logout's `id_token_hint`, an authorization request's
 * claims). The 303 names only a handle: 256 random bits, good once, at the endpoint the form was
 * posted to, for POSTED_FORM_SECONDS. The store holds the form sealed with the key-encryption key,
 * under the SHA-256 of the handle, so a copy of it neither reads the form nor finds it by a handle
 * seen in someone's history.
 */
export class PostedForms {
  readonly #forms: ModelStore;
  readonly #keys: KeyRing;

  constructor(forms: ModelStore, keys: KeyRing) {
    this.#forms = forms;
    this.#keys = keys;
  }

  /** Parks a form (its urlencoded text) posted to `endpoint` (a path), and gives the handle the GET will name it by. */
  async park(endpoint: string, form: string): Promise<string> {
    const handle = randomBytes(32).toString('base64url');
    await this.#forms.upsert(digest(handle), { endpoint, form: this.#keys.seal(form) }, POSTED_FORM_SECONDS);
    return handle;
  }

  /**
   * The form parked under `handle` for `endpoint`, for exactly one caller however many race;
   * undefined once it was taken, has expired, never was, was posted to another endpoint, or was
   * sealed with a key the ring no longer holds.
   */
  async take(handle: string, endpoint: string): Promise<TakenForm | undefined> {
    const id = digest(handle);
    const parked = await this.#forms.find(id);
    if (typeof parked?.form !== 'string' || parked.endpoint !== endpoint) return undefined;
    const form = this.#keys.openIfKnown(parked.form);
    if (form === undefined) return undefined;
    const claim = await this.#forms.consume(id);
    if (claim === undefined) return undefined;
    const bestEffort = (write: Promise<void>) => write.catch(() => undefined);
    return {
      form,
      done: () => bestEffort(this.#forms.destroy(id)),
      giveBack: () => bestEffort(this.#forms.release(id, claim)),
    };
  }
}
