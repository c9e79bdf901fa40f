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

  it('counts the characters a person sees, once composed as the password is hashed: a decomposed accent or a flag is one', () => {
    // Five accented letters typed decomposed: ten code points, five characters.
    expect(passwordProblem('\u00e9\u00e1\u00ed\u00f3\u00fa'.normalize('NFD'))).to.equal('a password needs at least 8 characters');
    // Four flags: eight code points (two regional indicators each), four characters.
    const flags = '\u{1F1EB}\u{1F1F7}\u{1F1E9}\u{1F1EA}\u{1F1EF}\u{1F1F5}\u{1F1FA}\u{1F1F8}';
    expect(passwordProblem(flags)).to.equal('a password needs at least 8 characters');
    expect(passwordProblem(`${flags}\u{1F1EE}\u{1F1F9}\u{1F1EA}\u{1F1F8}\u{1F1E7}\u{1F1F7}\u{1F1E8}\u{1F1E6}`)).to.equal(undefined);
    // The longest counts code points, as the sign-in form's size limit does: a character with many marks is many.
    expect(passwordProblem(`long password ${'x\u0301\u0302'.repeat(400)}`)).to.equal(`a password may have at most ${MAX_PASSWORD_LENGTH} characters`);
  });

  describe('refuses a password attackers try first (NIST SP 800-63B, 3.1.1.2), saying why and what to do instead', () => {
    const why = 'which attackers try first: choose another (a few unrelated words make a strong one)';
    const context = { email: 'ada.lovelace@example.com', names: ['Ada Lovelace', 'Ada', 'Lovelace'], serviceNames: ['Analytical Engine Works', 'Difference Ltd'] };

    it('one of the most commonly used passwords, whatever its case, with a few digits added, or spaced out', () => {
      for (const common of ['password', 'qwerty123', 'qwertyuiop', 'iloveyou', 'Password1', 'PASSWORD123', 'p@ssw0rd', 'trustno1', 'I love you']) {
        expect(passwordProblem(common), common).to.equal(`this password is one of the most commonly used ones, ${why}`);
      }
      for (const common of ['monkey1984', 'Baseball2024', 'sunshine7', 'P@ssword1']) {
        expect(passwordProblem(common), common).to.equal(`this password is one of the most commonly used ones with a few digits added, ${why}`);
      }
    });

    it('one of them padded with punctuation or symbols, or with the commonest substitutions (@ for a, $ for s, 0 for o, 1 for i or l...)', () => {
      for (const padded of ['qwerty!!', '!!qwerty', 'monkey!!', 'dragon!!', 'iloveu!!', 'abc123!!', 'letmein!', 'pa$$word', 'Qwerty1!', 'Dragon1!', 'm0nk3y!!', 'l3tm31n!!']) {
        expect(passwordProblem(padded), padded).to.match(/^this password is one of the most commonly used ones/);
      }
      expect(passwordProblem('123456!!'), 'a run, which the list also holds').to.equal(`a password cannot be a run of consecutive characters (12345678, abcdefgh), ${why}`);
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
      for (const repeated of ['aaaaaaaa12', 'abab.abab.2024']) {
        expect(passwordProblem(repeated), repeated).to.equal(`a password cannot be one character or a few repeated (aaaaaaaa, abcabcab), ${why}`);
      }
      for (const run of ['abcdefghij', 'HGFEDCBA', '23456789', '98765432', 'abcdefgh1', 'abcd1234', 'wxyz2024']) {
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
      for (const workspace of ['acmecorp1', 'Acme Corp 2024', 'ACME-CORP!', 'Initrode!!']) {
        expect(passwordProblem(workspace, { ...context, workspaceNames: ['Acme Corp', 'Initrode'] }), workspace).to.equal(`a password cannot be the name of the service or of the workspace, ${why}`);
      }
    });

    it('says it to the user themselves, when they choose their own, of "your" email address and name, in sentences', () => {
      const own = { ...context, told: 'user' as const };
      const sentences = 'which attackers try first. Choose another: a few unrelated words make a strong one.';
      expect(passwordProblem('ada.lovelace', own)).to.equal(`A password cannot be your email address or a part of it, ${sentences}`);
      expect(passwordProblem('Ada Lovelace', { ...own, email: 'countess@example.com' })).to.equal(`A password cannot be your name or a part of it, ${sentences}`);
      expect(passwordProblem('Initrode!!', { ...own, workspaceNames: ['Initrode'] })).to.equal(`A password cannot be the name of the service or of a workspace you belong to, ${sentences}`);
      expect(passwordProblem('iloveyou', own)).to.equal(`This password is one of the most commonly used ones, ${sentences}`);
      expect(passwordProblem('short', own)).to.equal('A password needs at least 8 characters.');
    });

    it('says it to the user in the clause a command line ends, and of a workspace they are creating as such', () => {
      const asked = { ...context, told: 'user' as const, form: 'clause' as const };
      expect(passwordProblem('Ada Lovelace', { ...asked, email: 'countess@example.com' })).to.equal(`a password cannot be your name or a part of it, ${why}`);
      expect(passwordProblem('Initrode!!', { ...asked, workspaceNames: ['Initrode'], creatingWorkspace: true })).to.equal(`a password cannot be the name of the service or of the workspace you are creating, ${why}`);
      expect(passwordProblem('short', asked)).to.equal('a password needs at least 8 characters');
    });

    it('takes a passphrase of unrelated words, a random-looking 8 characters, and a passphrase that holds a name among other words', () => {
      for (const strong of ['correct horse battery staple', 'violet tram under seventeen maps', 'k7Rq!x2m', 'xK9mW2pQ', 'ada rides the tram at dawn',
        'Plum-orbit, kettle & nine!', 'Harbour.Velvet.Cactus.2031', '9#vL2!qZ7@', 'Zq8$wX3!pL', 'j4%Tb!0w']) {
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
