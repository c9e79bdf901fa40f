import { expect } from 'chai';
import fc from 'fast-check';

import { addressKey } from '../../src/rate_limits/addresses.ts';

/** Eight 16-bit groups, written out in full (no `::`), as one way among many to write the address. */
const written = (groups: readonly number[]) => groups.map((group) => group.toString(16)).join(':');
const groups16 = fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 });
const ipv4 = fc.tuple(...Array.from({ length: 4 }, () => fc.integer({ min: 0, max: 255 }))).map((bytes) => bytes.join('.'));

/** The bit at `index` (0 is the most significant) of the address. */
const flipBit = (groups: readonly number[], index: number) =>
  groups.map((group, i) => (i === Math.floor(index / 16) ? group ^ (0x8000 >> (index % 16)) : group));

describe('addressKey: the address a per-address limit counts', () => {
  it('counts an IPv6 address as its /64: ::1 to ::7 of one network are one address, the next network another', () => {
    const keys = Array.from({ length: 7 }, (_, i) => addressKey(`2001:db8:1234:5678::${i + 1}`, 64));
    expect(new Set(keys)).to.deep.equal(new Set(['2001:db8:1234:5678::/64']));
    expect(addressKey('2001:db8:1234:5679::1', 64)).to.equal('2001:db8:1234:5679::/64');
  });

  it('counts the prefix length it is given', () => {
    expect(addressKey('2001:db8:1234:5678:9abc::1', 48)).to.equal('2001:db8:1234::/48');
    expect(addressKey('2001:db8:1234:56ff::1', 56)).to.equal('2001:db8:1234:5600::/56');
    expect(addressKey('2001:db8::1', 128)).to.equal('2001:db8::1/128');
    expect(addressKey('2001:db8::1', 128)).to.not.equal(addressKey('2001:db8::2', 128));
  });

  it('reads an IPv6 address however it is written: case, leading zeros, `::`, a port, brackets, a zone', () => {
    const key = '2001:db8:1234:5678::/64';
    for (const form of ['2001:DB8:1234:5678::1', '2001:0db8:1234:5678:0000:0000:0000:0001', '[2001:db8:1234:5678::1]:443', '2001:db8:1234:5678::1%eth0']) {
      expect(addressKey(form, 64), form).to.equal(key);
    }
  });

  it('counts an IPv4-mapped address as the IPv4 address it maps, in any form', () => {
    for (const form of ['::ffff:192.0.2.1', '::FFFF:c000:201', '0:0:0:0:0:ffff:192.0.2.1', '[::ffff:192.0.2.1]:8080']) {
      expect(addressKey(form, 64), form).to.equal('192.0.2.1');
    }
    expect(addressKey('192.0.2.1', 64)).to.equal('192.0.2.1');
    expect(addressKey('192.0.2.1:443', 64), 'with a port').to.equal('192.0.2.1');
  });

  it('keeps what is not an address as a key of its own', () => {
    expect(addressKey('unknown', 64)).to.equal('unknown');
    expect(addressKey('', 64)).to.equal('');
  });

  it('property: two IPv6 addresses share a key exactly when their first `prefix` bits agree', () => {
    fc.assert(fc.property(groups16, fc.integer({ min: 32, max: 128 }), fc.integer({ min: 0, max: 127 }), (groups, prefix, bit) => {
      fc.pre(!(groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff));
      const other = flipBit(groups, bit);
      fc.pre(!(other.slice(0, 5).every((group) => group === 0) && other[5] === 0xffff));
      const same = addressKey(written(groups), prefix) === addressKey(written(other), prefix);
      expect(same, `${written(groups)} and ${written(other)} at /${prefix}`).to.equal(bit >= prefix);
    }));
  });

  it('property: the key does not depend on how the address is written, and is an address of its network', () => {
    fc.assert(fc.property(fc.ipV6(), fc.integer({ min: 32, max: 128 }), (address, prefix) => {
      const key = addressKey(address, prefix);
      expect(addressKey(address.toUpperCase(), prefix)).to.equal(key);
      expect(addressKey(`[${address}]:1234`, prefix)).to.equal(key);
      if (key.includes('/')) expect(addressKey(key.split('/')[0]!, prefix), 'the network is its own key').to.equal(key);
    }));
  });

  it('property: an IPv4 address and its IPv4-mapped form count as one, at any prefix length', () => {
    fc.assert(fc.property(ipv4, fc.integer({ min: 32, max: 128 }), (address, prefix) => {
      expect(addressKey(address, prefix)).to.equal(address);
      expect(addressKey(`::ffff:${address}`, prefix)).to.equal(address);
    }));
  });
});
