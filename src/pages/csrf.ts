import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Anti-CSRF tokens for the login and consent forms: an HMAC of the interaction's id, so a form
 * is only accepted for the interaction it was rendered for, and no server state is needed.
 * (The engine's interaction cookie already binds the browser; this binds the form.)
 */
export class CsrfTokens {
  readonly #key: string;

  constructor(key: string) {
    this.#key = key;
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
