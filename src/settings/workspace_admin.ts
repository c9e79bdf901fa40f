import { hash } from 'node:crypto';

import type { ApiKeyRecord, ModelStore } from '../../adapters/store.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { ApiKeyError, type ApiKeys, type NewApiKey } from '../api_keys/api_keys.ts';
import { formIdOf, readApiKeyForm, type ApiKeyFormRefusal } from './api_key_form.ts';

/**
 * How long a create form's mark of use stays: as long as the form can be sent at all (its token
 * is its browser session's), so a reload of the page that showed a key makes none however late.
 */
const FORM_MARKER_SECONDS = LIFETIMES.Session;

/**
 * What a workspace admin does with the workspace's API keys, through the same ApiKeys logic the
 * admin CLI and the data API use (creation, digest-only storage, revocation).
 */
export class WorkspaceAdmin {
  readonly #apiKeys: ApiKeys;
  /** Used-once markers (the store's atomic insert), one per create form shown. */
  readonly #markers: ModelStore;

  constructor({ apiKeys, markers }: { apiKeys: ApiKeys; markers: ModelStore }) {
    this.#apiKeys = apiKeys;
    this.#markers = markers;
  }

  /**
   * A new key from the create form, or what is wrong with the form (and the name given, to show
   * again). Each form is shown with an id of its own (api_key_form.ts), marked used by the key it makes
   * (the store's atomic insert): sent again (a reload of the page that showed the key, a restored
   * tab, copies of a double submit), it makes no second one (409).
   */
  async createKey(workspaceId: string, body: Record<string, unknown>): Promise<NewApiKey | ApiKeyFormRefusal> {
    const form = readApiKeyForm(body);
    if ('error' in form) return form;
    const formId = formIdOf(body);
    if (!formId) return { error: 'This form is out of date: no key was created. Create one with the form below.', name: form.request.name, status: 400 };
    const marker = hash('sha256', `api-key-form\n${workspaceId}\n${formId}`, 'base64url');
    if (!await this.#markers.insertNew(marker, { kind: 'ApiKeyForm' }, FORM_MARKER_SECONDS)) {
      return { error: sentBefore(form.request.name), name: form.request.name, status: 409 };
    }
    try {
      return await this.#apiKeys.create(workspaceId, form.request.name, form.request.expiresIn);
    } catch (error) {
      // The form may be sent again, corrected.
      await this.#markers.destroy(marker);
      if (error instanceof ApiKeyError) return { error: `The key was not created: ${error.message}.`, name: form.request.name, field: 'name' };
      throw error;
    }
  }

  /**
   * Revokes one of the workspace's keys; false for a key of another workspace (never touched) or
   * none. This instance refuses it at once; every other within 2 s (ApiKeys).
   */
  async revokeKey(workspaceId: string, keyId: string): Promise<boolean> {
    if (!await this.findKey(workspaceId, keyId)) return false;
    return (await this.#apiKeys.revoke(keyId)) !== undefined;
  }

  /** One of the workspace's keys; undefined for a key of another workspace, or none. */
  async findKey(workspaceId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    const key = await this.#apiKeys.get(keyId);
    return key?.workspaceId === workspaceId ? key : undefined;
  }
}

/**
 * The answer to a create form sent again: its first sending created the key (a double click, a
 * reload of the page that showed it), whose secret only the answer to that sending held, which
 * this browser may never have shown (a double click's first answer is dropped).
 */
function sentBefore(name: string): string {
  return `This form was sent before, and its first sending created the key “${name}”: no second key was created. `
    + `The key’s secret was shown only in the answer to that first sending. If you did not copy it, revoke “${name}” (it is in the list below) and create another.`;
}
