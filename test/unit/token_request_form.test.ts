import { parse } from 'node:querystring';

import { expect } from 'chai';
import fc from 'fast-check';

import { TokenRequestForm } from '../../src/http/token_request_form.ts';

/**
 * What the host reads of a token request before the engine (the client_id its rate limits count,
 * the resource it checks) is what the engine then reads: the same parser, so an encoding trick
 * cannot make the two see different values.
 */
describe('token request form', () => {
  it('reads every parameter as the engine does, however it is encoded', () => {
    const pairs = fc.array(fc.tuple(fc.constantFrom('client_id', 'resource', 'grant_type', 'x'), fc.string()), { maxLength: 6 });
    fc.assert(fc.property(pairs, fc.boolean(), (entries, plusForSpace) => {
      const body = entries
        .map(([name, value]) => `${name}=${plusForSpace ? encodeURIComponent(value).replaceAll('%20', '+') : encodeURIComponent(value)}`)
        .join('&');
      const form = new TokenRequestForm(body);
      const engine = parse(body);
      for (const name of ['client_id', 'resource', 'grant_type', 'x']) {
        const expected = engine[name] === undefined ? [] : ([] as string[]).concat(engine[name]);
        expect(form.getAll(name)).to.deep.equal(expected);
        expect(form.get(name)).to.equal(expected[0] ?? null);
      }
    }));
  });

  it('keeps repeated parameters in order, so a request naming two resources or two clients is seen as such', () => {
    const form = new TokenRequestForm('resource=https%3A%2F%2Fa.example&resource=https://b.example&client_id=one+two');
    expect(form.getAll('resource')).to.deep.equal(['https://a.example', 'https://b.example']);
    expect(form.get('client_id')).to.equal('one two');
    expect(form.getAll('scope')).to.deep.equal([]);
    expect(form.get('scope')).to.equal(null);
  });
});
