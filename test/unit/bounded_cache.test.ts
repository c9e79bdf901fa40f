import { expect } from 'chai';
import fc from 'fast-check';

import { boundedCache } from '../../src/shared/bounded_cache.ts';

/** The cache keeps its own copy of a string key: it must still find every key, and tell any two apart. */
describe('the bounded cache', () => {
  it('finds every string key it was given, a lone surrogate or a slice of a request body included, and never one for another', () => {
    fc.assert(fc.property(fc.uniqueArray(fc.string({ unit: 'binary', maxLength: 40 }), { minLength: 1, maxLength: 20 }), (keys) => {
      const cache = boundedCache<string, number>({ max: 100 });
      const body = `grant_type=authorization_code&${keys.join('&')}&client_secret=s`;
      keys.forEach((key, index) => {
        const at = body.indexOf(key, 30);
        cache.set(body.slice(at, at + key.length), index);
      });
      return keys.every((key, index) => cache.get(key) === index);
    }));
    const cache = boundedCache<string, string>({ max: 10 });
    cache.set('a\uD800', 'high');
    cache.set('a\uDC00', 'low');
    expect([cache.get('a\uD800'), cache.get('a\uDC00'), cache.get('a\uFFFD')]).to.deep.equal(['high', 'low', undefined]);
  });
});
