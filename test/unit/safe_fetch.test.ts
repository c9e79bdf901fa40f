import { expect } from 'chai';
import fc from 'fast-check';

import { isSpecialUse, safeFetch, SafeFetchError } from '../../src/shared/safe_fetch.ts';

/**
 * The address rules of the one fetcher for URLs someone else chose: which addresses it never
 * connects to, in every spelling. Its fetches themselves (redirects, size, time, pinning) are
 * tested through the server: test/http/metadata_documents.test.ts.
 */
describe('the SSRF-safe fetcher\'s address rules', () => {
  const special = [
    '0.0.0.0', '10.1.2.3', '100.64.0.1', '100.127.255.254', '127.0.0.1', '127.255.255.255', '169.254.169.254', '172.16.0.1',
    '172.31.255.255', '192.0.0.8', '192.0.2.1', '192.168.1.1', '198.18.0.1', '198.51.100.7', '203.0.113.9', '224.0.0.1', '255.255.255.255',
    '::', '::1', 'fe80::1', 'fc00::1', 'fd12:3456::1', 'ff02::1', '2001:db8::1', 'fec0::1', '64:ff9b::7f00:1', '2002:7f00:1::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:a9fe:a9fe', '0:0:0:0:0:ffff:192.168.0.1', '::ffff:0:0', 'not-an-address',
    // The rest of IANA's special-purpose registries: AS112 and AMT, documentation (RFC 9637), SRv6 (RFC 9602), the dummy prefix.
    '192.31.196.1', '192.52.193.1', '192.175.48.1', '2620:4f:8000::1', '3fff::1', '3fff:fff::1', '5f00::1', '100:0:0:1::1',
  ];
  const publicAddresses = ['1.1.1.1', '8.8.8.8', '93.184.215.14', '100.63.255.255', '100.128.0.0', '172.32.0.1', '2606:4700:4700::1111', '2a00:1450::1'];

  it('refuses loopback, private, link-local, CGNAT, multicast, unique-local and reserved addresses, and their IPv4-mapped forms', () => {
    for (const address of special) expect(isSpecialUse(address), address).to.equal(true);
  });

  it('allows public addresses', () => {
    for (const address of publicAddresses) expect(isSpecialUse(address), address).to.equal(false);
  });

  it('refuses every IPv4-mapped address, however it is spelled', () => {
    const octet = fc.integer({ min: 0, max: 255 });
    fc.assert(fc.property(octet, octet, octet, octet, fc.boolean(), (a, b, c, d, upper) => {
      const hex = (high: number, low: number) => ((high << 8) | low).toString(16);
      const spellings = [`::ffff:${a}.${b}.${c}.${d}`, `::ffff:${hex(a, b)}:${hex(c, d)}`, `0:0:0:0:0:ffff:${a}.${b}.${c}.${d}`];
      return spellings.every((mapped) => isSpecialUse(upper ? mapped.toUpperCase() : mapped));
    }), { numRuns: 2000 });
  });

  it('fetches nothing but https URLs without a user name or password', async () => {
    const get = safeFetch({ trustedHosts: [], timeoutMs: 1000, maxBytes: 1000 });
    for (const url of ['http://example.com/client.json', 'ftp://example.com/x', 'https://user:pass@example.com/x', 'not a url']) {
      let refused: unknown;
      try {
        await get(url);
      } catch (error) {
        refused = error;
      }
      expect(refused, url).to.be.instanceOf(SafeFetchError);
    }
  });
});
