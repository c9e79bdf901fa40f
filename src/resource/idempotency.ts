import type { KeyedCreate } from '../../adapters/store.ts';
import { digest } from '../shared/digest.ts';
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
 * How the store keeps a create made under `key`: under a digest of the key and the credential
 * that sent it (so two clients' keys never meet, and the store holds neither), with a fingerprint
 * of what was asked, so the same key sent with another body is told apart from a retry.
 */
export function keyedCreate(principal: Principal, key: string, object: ObjectDefinition, changes: Changes): KeyedCreate {
  const asked = Object.entries(changes).filter(([, value]) => value !== null).sort(([a], [b]) => (a < b ? -1 : 1));
  return {
    key: digest(`${credentialKey(principal)}\n${key}`),
    fingerprint: digest(JSON.stringify([object.namePlural, asked])),
    keptFor: IDEMPOTENCY_WINDOW_SECONDS,
  };
}
