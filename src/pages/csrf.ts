import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

/**
 * Anti-CSRF tokens for the login and consent forms: an HMAC of the interaction's id, so a form
 * is only accepted for the interaction it was rendered for, and no server state is needed.
 * (The engine's interaction cookie already binds the browser; this binds the form.)
 */
export class CsrfTokens {
  /** A key object, not the string: Node checks a raw key's kind at every HMAC, at a cost. */
  readonly #key: KeyObject;

  constructor(key: string) {
    this.#key = createSecretKey(key, 'utf8');
  }

  issue(interactionUid: string): string {
    return createHmac('sha256', this.#key).update(`csrf:${interactionUid}`).digest('base64url');
  }

  verify(interactionUid: string, presented: unknown): boolean {
    if (typeof presented !== 'string') return false;
    const expected = Buffer.from(this.issue(interactionUid));
    const actual = Buffer.from(presented);
    return expected.length === actual.length && timingSafeEqual(expected, actual);
  }
}
