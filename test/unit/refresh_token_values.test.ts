import { randomBytes } from 'node:crypto';

import { expect } from 'chai';
import fc from 'fast-check';

import { RefreshTokenValues } from '../../src/engine/refresh_tokens.ts';
import { KeyRing } from '../../src/keys/key_encryption.ts';

/** Refresh token values name their grant, and only values this server made are taken for its grant's. */
describe('refresh token values', () => {
  const ring = new KeyRing(randomBytes(32));
  const values = new RefreshTokenValues(ring.derivedKeys(RefreshTokenValues.PURPOSE));
  const token = /^[A-Za-z0-9_-]{43}$/;

  it('names the grant of a value it made, whatever the grant id and random part', () => {
    fc.assert(fc.property(fc.stringMatching(token), fc.stringMatching(token), (grantId, random) => values.grantOf(values.make(grantId, random)) === grantId));
  });

  it('names no grant for a value changed anywhere, or made with another key', () => {
    const made = values.make('g'.repeat(43), 'r'.repeat(43));
    fc.assert(fc.property(fc.nat({ max: made.length - 1 }), fc.constantFrom('A', 'z', '0', '-', '.'), (at, character) => {
      const changed = `${made.slice(0, at)}${character}${made.slice(at + 1)}`;
      return changed === made || values.grantOf(changed) === undefined;
    }));
    const other = new RefreshTokenValues(new KeyRing(randomBytes(32)).derivedKeys(RefreshTokenValues.PURPOSE));
    expect(other.grantOf(made)).to.equal(undefined);
    expect(values.grantOf(`${made}.x`)).to.equal(undefined);
  });

  it('still names the grant of values made before the key-encryption key was rotated, while the old key is listed as previous', () => {
    const oldKey = randomBytes(32);
    const before = new RefreshTokenValues(new KeyRing(oldKey).derivedKeys(RefreshTokenValues.PURPOSE));
    const made = before.make('grant-1', 'random-1');
    const after = new RefreshTokenValues(new KeyRing(randomBytes(32), [oldKey]).derivedKeys(RefreshTokenValues.PURPOSE));
    expect(after.grantOf(made)).to.equal('grant-1');
    expect(after.grantOf(after.make('grant-2', 'random-2'))).to.equal('grant-2');
  });
});
