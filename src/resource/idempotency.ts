import { createHmac } from 'node:crypto';

import type { KeyedCreate } from '../../adapters/store.ts';
import { invalidRequest } from '../shared/http_error.ts';
import type { ObjectDefinition } from './objects.ts';
import { credentialKey, type Principal } from './principal.ts';
import type { Changes } from './validation.ts';

/**
 * How long a create's idempotency key is kept: a client retrying a create whose answer it did not
 * get (a timeout, a 503 while the store failed over) within this time gets the record that create
 * made, never a second one. A day, as payment APIs keep theirs.
 */
export const IDEMPOTENCY_WINDOW_SECONDS = 24 * 60 * 60;

/** What the keys creates are kept under are derived for, from the key-encryption keys. */
export const IDEMPOTENCY_PURPOSE = 'idempotent creates';

/** The longest key taken, in characters: room for a UUID or a client's own request id, bounded. */
const MAX_KEY_LENGTH = 255;

/** A Structured Field string (RFC 8941 section 3.3.3), as draft-ietf-httpapi-idempotency-key-header writes the key. */
const SF_STRING = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/;
/** The bare form many clients send (a UUID, a token): visible ASCII, no quote, comma or space. */
const BARE_KEY = /^[\x21\x23-\x2b\x2d-\x7e]+$/;

/** The key an `Idempotency-Key` header gives, or undefined without one; a malformed one is refused. */
export function idempotencyKeyOf(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? undefined : header.trim();
  const quoted = value === undefined ? undefined : SF_STRING.exec(value)?.[1]?.replace(/\\(["\\])/g, '$1');
  const key = quoted ?? (value !== undefined && BARE_KEY.test(value) ? value : undefined);
  if (!key || key.length > MAX_KEY_LENGTH) {
    throw invalidRequest(`Idempotency-Key: give one key of 1 to ${MAX_KEY_LENGTH} visible ASCII characters, such as a UUID, bare or as a quoted string`);
  }
  return key;
}

/**
 * How the store keeps a create made under an idempotency key: under an HMAC of the key and the
 * credential that sent it (so two clients' keys never meet), with an HMAC of what was asked (so the
 * same key sent with another body is told apart from a retry). Keyed with keys derived from the
 * key-encryption keys, which the store does not hold: a copy of it cannot be checked against a
 * guess of what a record, deleted since, held.
 */
export class IdempotentCreates {
  readonly #keys: readonly Buffer[];

  /** `keys`: the current one first, then those of earlier key-encryption keys still in the ring. */
  constructor(keys: readonly Buffer[]) {
    if (!keys.length) throw new Error('idempotent creates need at least one key');
    this.#keys = keys;
  }

  /**
   * The create as each key keeps it, the current key's first: a create made before a
   * key-encryption key rotation is found under the key it was made with.
   */
  keyed(principal: Principal, key: string, object: ObjectDefinition, changes: Changes): KeyedCreate[] {
    const asked = JSON.stringify([object.namePlural, Object.entries(changes).filter(([, value]) => value !== null).sort(([a], [b]) => (a < b ? -1 : 1))]);
    const scoped = `${credentialKey(principal)}\n${key}`;
    return this.#keys.map((secret) => ({
      key: createHmac('sha256', secret).update(scoped).digest('base64url'),
      fingerprint: createHmac('sha256', secret).update(asked).digest('base64url'),
      keptFor: IDEMPOTENCY_WINDOW_SECONDS,
    }));
  }
}
