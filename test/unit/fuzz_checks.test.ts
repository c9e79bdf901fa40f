import { expect } from 'chai';

import { responseProblems, type Expectation } from '../fuzz/checks.ts';
import type { RawRequest, RawResponse } from '../fuzz/http.ts';

/** The fuzz suite's leak check: what it takes for a leak, and what it knows is an echo. */
describe('fuzz leak check', () => {
  const expectation: Expectation = { surface: 'bearer', issuer: 'http://127.0.0.1:1' };
  const listing = (city: string): RawResponse => ({
    status: 200, headers: { 'content-type': 'application/json' }, text: JSON.stringify({ data: { companies: [{ name: 'Acme', city }] } }),
  });
  const list: RawRequest = { method: 'GET', path: '/rest/companies', headers: {} };

  it('flags an unfilled value or a stack frame the request did not send', () => {
    expect(responseProblems(list, listing('NaN'), expectation)).to.deep.equal(['an unfilled value ("NaN")']);
    expect(responseProblems(list, listing('at run (file:///srv/a.ts:1:2)'), expectation).join()).to.match(/a stack frame/);
  });

  it('takes a value the request sent, or one an earlier request stored, for an echo', () => {
    const create: RawRequest = { method: 'POST', path: '/rest/companies', headers: {}, body: '{"name":"Acme","city":"NaN"}' };
    expect(responseProblems(create, { ...listing('NaN'), status: 201 }, expectation)).to.deep.equal([]);
    expect(responseProblems(list, listing('NaN'), { ...expectation, stored: () => String(create.body) })).to.deep.equal([]);
  });
});
