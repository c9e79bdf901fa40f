import { argon2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

import { expect } from 'chai';

import { hashPassword, MAX_PASSWORD_LENGTH, passwordProblem, verifyPassword } from '../../src/accounts/passwords.ts';

/**
 * A password is the same whichever Unicode form it is typed in (RFC 8265 OpaqueString: NFC):
 * "pässwörd" set with precomposed letters signs in with decomposed ones, and the other way round,
 * and a password hashed as typed before passwords were normalized still signs in.
 */
describe('passwords', () => {
  const composed = 'p\u00e4ssw\u00f6rd \u00fcn\u00efcode';
  const decomposed = composed.normalize('NFD');

  it('counts a password\'s characters as a person does: an emoji is one, not the two UTF-16 units it takes', () => {
    expect(passwordProblem('\u{1F600}'.repeat(4))).to.equal('a password needs at least 8 characters');
    expect(passwordProblem('\u{1F600}'.repeat(8))).to.equal(undefined);
    expect(passwordProblem('\u{1F600}'.repeat(MAX_PASSWORD_LENGTH))).to.equal(undefined);
    expect(passwordProblem('\u{1F600}'.repeat(MAX_PASSWORD_LENGTH + 1))).to.equal(`a password may have at most ${MAX_PASSWORD_LENGTH} characters`);
  });

  it('verifies a password typed in either Unicode form against a hash of the other', async () => {
    expect(decomposed).to.not.equal(composed);
    expect(await verifyPassword(decomposed, await hashPassword(composed))).to.equal(true);
    expect(await verifyPassword(composed, await hashPassword(decomposed))).to.equal(true);
    expect(await verifyPassword('passwords unicode', await hashPassword(composed))).to.equal(false);
  });

  it('still verifies a password hashed as typed, in decomposed form, before passwords were normalized', async () => {
    const nonce = randomBytes(16);
    const params = { memory: 19_456, passes: 2, parallelism: 1, tagLength: 32 };
    const tag = await promisify(argon2)('argon2id', { message: decomposed, nonce, ...params });
    const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');
    const phc = `$argon2id$v=19$m=${params.memory},t=${params.passes},p=${params.parallelism}$${b64(nonce)}$${b64(tag)}`;
    expect(await verifyPassword(decomposed, phc)).to.equal(true);
  });
});
