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
    // Eight different emoji: one repeated would be refused as repetitive (below).
    const eight = '\u{1F600}\u{1F680}\u{1F308}\u{1F355}\u{1F3B8}\u{1F41D}\u{1F332}\u{1F9E9}';
    expect(passwordProblem('\u{1F600}'.repeat(4))).to.equal('a password needs at least 8 characters');
    expect(passwordProblem(eight)).to.equal(undefined);
    expect(passwordProblem(eight.repeat(MAX_PASSWORD_LENGTH / 8))).to.equal(undefined);
    expect(passwordProblem(`${eight.repeat(MAX_PASSWORD_LENGTH / 8)}\u{1F600}`)).to.equal(`a password may have at most ${MAX_PASSWORD_LENGTH} characters`);
  });

  describe('refuses a password attackers try first (NIST SP 800-63B, 3.1.1.2), saying why and what to do instead', () => {
    const why = 'which attackers try first: choose another (a few unrelated words make a strong one)';
    const context = { email: 'ada.lovelace@example.com', names: ['Ada Lovelace', 'Ada', 'Lovelace'], serviceNames: ['Analytical Engine Works', 'Difference Ltd'] };

    it('one of the most commonly used passwords, whatever its case, with a few digits added, or spaced out', () => {
      for (const common of ['password', 'qwerty123', 'qwertyuiop', 'iloveyou', 'Password1', 'PASSWORD123', 'p@ssw0rd', 'trustno1', 'I love you']) {
        expect(passwordProblem(common), common).to.equal(`this password is one of the most commonly used ones, ${why}`);
      }
      for (const common of ['monkey1984', 'Baseball2024', 'sunshine7']) {
        expect(passwordProblem(common), common).to.equal(`this password is one of the most commonly used ones with a few digits added, ${why}`);
      }
    });

    it('compares it as it is hashed (composed): a name typed with decomposed accents is the name', () => {
      const name = 'Zo\u00eb M\u00fcller';
      expect(passwordProblem('ZOE\u0308 MU\u0308LLER', { names: [name] })).to.equal(`a password cannot be the user's name or a part of it, ${why}`);
      expect(passwordProblem('zoe\u0308mu\u0308ller', { names: [name.normalize('NFD')] })).to.equal(`a password cannot be the user's name or a part of it, ${why}`);
    });

    it('one character or a few repeated, or a run of consecutive characters, which the list may lack', () => {
      for (const repeated of ['aaaaaaaa', '!!!!!!!!!!', 'xyxyxyxyxy', 'qwe.qwe.qwe.', '\u{1F600}'.repeat(8)]) {
        expect(passwordProblem(repeated), repeated).to.equal(`a password cannot be one character or a few repeated (aaaaaaaa, abcabcab), ${why}`);
      }
      for (const run of ['abcdefghij', 'HGFEDCBA', '23456789', '98765432']) {
        expect(passwordProblem(run), run).to.equal(`a password cannot be a run of consecutive characters (12345678, abcdefgh), ${why}`);
      }
    });

    it('the account\'s email address or a part of it, the user\'s name, the service\'s or workspace\'s name, alone or with a digit or two added', () => {
      for (const email of ['ada.lovelace@example.com', 'Ada.Lovelace@Example.com1', 'ada.lovelace', 'adalovelace99']) {
        expect(passwordProblem(email, context), email).to.equal(`a password cannot be the email address or a part of it, ${why}`);
      }
      for (const name of ['Ada Lovelace', 'ada lovelace 1815']) {
        expect(passwordProblem(name, { ...context, email: 'countess@example.com' }), name).to.equal(`a password cannot be the user's name or a part of it, ${why}`);
      }
      for (const service of ['analytical engine works', 'Analytical', 'Difference1', 'workspace', 'Workspace2024']) {
        expect(passwordProblem(service, context), service).to.equal(`a password cannot be the name of the service or of the workspace, ${why}`);
      }
      expect(passwordProblem('adalovelace', {}), 'no context known: not a common password').to.equal(undefined);
    });

    it('takes a passphrase of unrelated words, a random-looking 8 characters, and a passphrase that holds a name among other words', () => {
      for (const strong of ['correct horse battery staple', 'violet tram under seventeen maps', 'k7Rq!x2m', 'xK9mW2pQ', 'ada rides the tram at dawn']) {
        expect(passwordProblem(strong, context), strong).to.equal(undefined);
      }
    });
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
