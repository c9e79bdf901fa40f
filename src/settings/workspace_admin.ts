import { hash } from 'node:crypto';

import type { ApiKeyRecord, ModelStore } from '../../adapters/store.ts';
import { ApiKeyError, type ApiKeys, type NewApiKey } from '../api_keys/api_keys.ts';
import { readApiKeyForm } from './api_key_form.ts';

/**
 * What a workspace admin does with the workspace's API keys, through the same ApiKeys logic the
 * admin CLI and the data API use (creation, digest-only storage, revocation).
 */
/** How long the create form's marker stays: long enough for copies of one form sent at the same moment. */
const FORM_MARKER_SECONDS = 60;

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
   * again). A form sent again once it has made a key (a reload of the page that showed the key, a
   * restored tab) names the newest key as it was before: it makes no second one (409). Copies sent
   * at the same moment (a double submit) all name it still: the first to claim the form's marker
   * creates the key, the others get the same 409.
   */
  async createKey(workspaceId: string, body: Record<string, unknown>): Promise<NewApiKey | { error: string; name: string; status?: number }> {
    const form = readApiKeyForm(body);
    if ('error' in form) return form;
    const newest = (await this.#apiKeys.list(workspaceId)).at(-1)?.id ?? '';
    const marker = hash('sha256', `api-key-form\n${workspaceId}\n${newest}`, 'base64url');
    if (body.after !== newest || !await this.#markers.insertNew(marker, { kind: 'ApiKeyForm' }, FORM_MARKER_SECONDS)) {
      return { error: 'This form was sent before, or the keys changed since it was shown: no key was created. The keys below are the workspace’s now; create one again if you need it.', name: form.request.name, status: 409 };
    }
    try {
      return await this.#apiKeys.create(workspaceId, form.request.name, form.request.expiresIn);
    } catch (error) {
      // The form may be sent again, corrected.
      await this.#markers.destroy(marker);
      if (error instanceof ApiKeyError) return { error: `The key was not created: ${error.message}.`, name: form.request.name };
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
