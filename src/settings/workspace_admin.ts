import type { ApiKeyRecord, ModelStore } from '../../adapters/store.ts';
import { ApiKeyError, type ApiKeys, type NewApiKey } from '../api_keys/api_keys.ts';
import { readApiKeyForm, type ApiKeyFormRefusal } from './api_key_form.ts';
import { CreateForms } from './form_ids.ts';

/**
 * What a workspace admin does with the workspace's API keys, through the same ApiKeys logic the
 * admin CLI and the data API use (creation, digest-only storage, revocation).
 */
export class WorkspaceAdmin {
  readonly #apiKeys: ApiKeys;
  /** The create forms, each sent once. */
  readonly #forms: CreateForms;

  constructor({ apiKeys, markers }: { apiKeys: ApiKeys; markers: ModelStore }) {
    this.#apiKeys = apiKeys;
    this.#forms = new CreateForms(markers, 'api-key', 'ApiKeyForm');
  }

  /**
   * A new key from the create form, or what is wrong with the form (and the name given, to show
   * again). Each form is shown with an id of its own, claimed by the key it makes (form_ids.ts):
   * sent again (a reload of the page that showed the key, a restored
   * tab, copies of a double submit), it makes no second one (409).
   */
  async createKey(workspaceId: string, body: Record<string, unknown>): Promise<NewApiKey | ApiKeyFormRefusal> {
    const form = readApiKeyForm(body);
    if ('error' in form) return form;
    const claim = await this.#forms.claim(workspaceId, body);
    if ('refused' in claim) {
      return claim.refused === 'out_of_date'
        ? { error: 'This form is out of date: no key was created. Create one with the form below.', name: form.request.name, status: 400 }
        : { error: sentBefore(form.request.name), name: form.request.name, status: 409 };
    }
    try {
      return await this.#apiKeys.create(workspaceId, form.request.name, form.request.expiresIn);
    } catch (error) {
      // The form may be sent again, corrected.
      await claim.claimed.release();
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
