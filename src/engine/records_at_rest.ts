import type { ModelPayload } from '../../adapters/store.ts';
import { digest } from '../shared/digest.ts';
import type { KeyRing } from '../keys/key_encryption.ts';

/**
 * What the engine's records look like in the store, so that a copy of it (the SQLite file, a
 * Redis backup) gives no one a usable credential. The engine is handed its values back unchanged.
 *
 * - A record whose id is a bearer secret (a code, a refresh token, a session or interaction id,
 *   a registration or initial access token) is stored under the SHA-256 of its id, without the
 *   id in it: `find(id)` hashes what it is asked for and puts the id back.
 * - The few secrets the engine needs back from a lookup by something else are sealed with the
 *   key-encryption key: a session's id (found by its uid), an interaction's session cookie, its
 *   resume URL (which carries the interaction's id) and the id of the pushed request it comes from
 *   (a `request_uri` usable until the code is issued), a device code's user code (its lookup
 *   index is hashed too).
 *
 * Plain SHA-256 suffices: every such value is at least 128 random bits, so nothing can be guessed
 * from its digest, and lookups keep working when the key-encryption key is rotated.
 */
const SECRET_ID_MODELS = new Set([
  'AuthorizationCode',
  'RefreshToken',
  'AccessToken',
  'ClientCredentials',
  'Session',
  'Interaction',
  'RegistrationAccessToken',
  'InitialAccessToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
  'PushedAuthorizationRequest',
]);
/** Models found by something other than their id, whose id must therefore be sealed, not dropped. */
const FOUND_BY_INDEX = new Set(['Session', 'DeviceCode']);

interface SealedSecrets {
  jti?: string;
  sessionCookie?: string;
  returnTo?: string;
  parJti?: string;
  userCode?: string;
}

/** The store id of a record of the engine's `model` whose id is `id`: needs no key, so lookups outlive key rotations. */
export function storedId(model: string, id: string): string {
  return SECRET_ID_MODELS.has(model) ? digest(id) : id;
}

export class RecordsAtRest {
  readonly #keys: KeyRing;

  constructor(keys: KeyRing) {
    this.#keys = keys;
  }

  /** The store id of a record. */
  id(model: string, id: string): string {
    return storedId(model, id);
  }

  /** The store's user-code index value. */
  userCode(userCode: string): string {
    return digest(userCode);
  }

  toStored(model: string, payload: ModelPayload): ModelPayload {
    if (!SECRET_ID_MODELS.has(model)) return payload;
    const { jti, ...stored } = payload;
    const secrets: SealedSecrets = {};
    if (FOUND_BY_INDEX.has(model) && typeof jti === 'string') secrets.jti = jti;
    const session = stored.session as { cookie?: unknown } | undefined;
    if (typeof session?.cookie === 'string') {
      const { cookie, ...rest } = session;
      secrets.sessionCookie = cookie as string;
      stored.session = rest;
    }
    if (typeof stored.returnTo === 'string') {
      secrets.returnTo = stored.returnTo;
      delete stored.returnTo;
    }
    if (typeof stored.parJti === 'string') {
      secrets.parJti = stored.parJti;
      delete stored.parJti;
    }
    if (typeof stored.userCode === 'string') {
      secrets.userCode = stored.userCode;
      stored.userCode = this.userCode(stored.userCode);
    }
    if (Object.keys(secrets).length) stored.sealed = this.#keys.seal(JSON.stringify(secrets));
    return stored;
  }

  /**
   * The engine's payload from a stored record; `id` is the id it was found by, when it was found by
   * id. A record whose sealed secrets no configured key opens (sealed before a key-encryption key
   * was rotated out, as a browser session can be) is undefined, as an expired one is: the browser
   * signs in again.
   */
  fromStored(model: string, stored: ModelPayload, id?: string): ModelPayload | undefined {
    if (!SECRET_ID_MODELS.has(model)) return stored;
    const { sealed, ...payload } = stored;
    const opened = typeof sealed === 'string' ? this.#keys.openIfKnown(sealed) : '{}';
    if (opened === undefined) return undefined;
    const secrets = JSON.parse(opened) as SealedSecrets;
    const jti = id ?? secrets.jti;
    if (jti !== undefined) payload.jti = jti;
    if (secrets.sessionCookie !== undefined) payload.session = { ...(payload.session as object), cookie: secrets.sessionCookie };
    if (secrets.returnTo !== undefined) payload.returnTo = secrets.returnTo;
    if (secrets.parJti !== undefined) payload.parJti = secrets.parJti;
    if (secrets.userCode !== undefined) payload.userCode = secrets.userCode;
    return payload;
  }
}
