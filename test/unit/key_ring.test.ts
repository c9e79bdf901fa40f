import { createCipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';

import { expect } from 'chai';

import { RefreshTokenValues } from '../../src/engine/refresh_tokens.ts';
import { KeyEncryptionError, KeyRing } from '../../src/keys/key_encryption.ts';

/** A value sealed the way the format says (`kek1.<key id>.<iv>.<AES-256-GCM body and tag>`), without the KeyRing: what a store written by any earlier version holds. */
function sealedByHand(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  const id = createHash('sha256').update('kek-id').update(key).digest('base64url').slice(0, 8);
  return ['kek1', id, iv.toString('base64url'), body.toString('base64url')].join('.');
}

/** What is sealed or derived with the key-encryption key stays readable across restarts, upgrades and key rotations. */
describe('key ring', () => {
  const current = randomBytes(32);
  const previous = randomBytes(32);

  it('opens what it sealed, and a value sealed by the stored format without it', () => {
    const ring = new KeyRing(current);
    expect(ring.open(ring.seal('a session id'))).to.equal('a session id');
    expect(ring.open(sealedByHand(current, 'sealed before this version'))).to.equal('sealed before this version');
    expect(ring.isSealedWithCurrentKey(ring.seal('x'))).to.equal(true);
  });

  it('after a rotation, seals with the new key and still opens what the previous key sealed', () => {
    const rotated = new KeyRing(current, [previous]);
    expect(rotated.open(new KeyRing(previous).seal('old'))).to.equal('old');
    expect(new KeyRing(previous).isSealedWithCurrentKey(rotated.seal('new'))).to.equal(false);
    expect(() => new KeyRing(previous).open(rotated.seal('new'))).to.throw(KeyEncryptionError, /not configured/);
  });

  it('says where the key in use came from when it does not open a stored value: that is where the wrong key is', () => {
    const sealed = new KeyRing(current).seal('a signing key');
    expect(() => new KeyRing(previous, [], { from: 'the key file /home/ops/.config/workspace-oauth-server/key-encryption.key' }).open(sealed))
      .to.throw(KeyEncryptionError, /the key in use is from the key file \/home\/ops\/\.config\/workspace-oauth-server\/key-encryption\.key, which did not seal it; give the one that did as KEY_ENCRYPTION_KEY or KEY_ENCRYPTION_KEY_FILE/);
  });

  it('refuses an altered value', () => {
    const ring = new KeyRing(current);
    const sealed = ring.seal('a session id');
    const altered = `${sealed.slice(0, -2)}${sealed.endsWith('AA') ? 'BA' : 'AA'}`;
    expect(() => ring.open(altered)).to.throw(KeyEncryptionError, /altered/);
  });

  it('derives the same keys from the same key-encryption keys, the current one first, one set per purpose', () => {
    const derive = (key: Buffer, purpose: string) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), purpose, 32));
    const ring = new KeyRing(current, [previous]);
    expect(ring.derivedKeys('refresh token values')).to.deep.equal([derive(current, 'refresh token values'), derive(previous, 'refresh token values')]);
    expect(ring.derivedKeys('DPoP nonces')[0]).to.not.deep.equal(ring.derivedKeys('refresh token values')[0]);
  });

  it('keeps refresh token values made by any earlier version valid: their tag is the HMAC-SHA256 of grant and random part', () => {
    const [key] = new KeyRing(current).derivedKeys(RefreshTokenValues.PURPOSE);
    const tag = createHmac('sha256', key!).update('grant.random').digest().subarray(0, 16).toString('base64url');
    const values = new RefreshTokenValues([key!]);
    expect(values.make('grant', 'random')).to.equal(`grant.random.${tag}`);
    expect(values.grantOf(`grant.random.${tag}`)).to.equal('grant');
  });
});
