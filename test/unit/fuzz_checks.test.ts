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

/** The fuzz suite's error shape check: RFC 6749's charset for error_description, wherever one is carried. */
describe('fuzz error description check', () => {
  const expectation: Expectation = { surface: 'bearer', issuer: 'http://127.0.0.1:1', redirectUris: ['https://app.example/cb'] };
  const request: RawRequest = { method: 'GET', path: '/rest/companies', headers: {} };
  const refusal = (description: string, challenge = 'Bearer realm="oauth"'): RawResponse => ({
    status: 401,
    headers: { 'content-type': 'application/json', 'www-authenticate': challenge },
    text: JSON.stringify({ error: 'invalid_token', error_description: description }),
  });

  it('takes printable ASCII without a double quote or a backslash, in a body, a challenge or a redirect', () => {
    expect(responseProblems(request, refusal("the token's scope is 'api' (RFC 6750)"), expectation)).to.deep.equal([]);
    const challenge = 'Bearer realm="oauth", error="invalid_token", error_description="caf%C3%A9 is unknown"';
    expect(responseProblems(request, refusal('caf%C3%A9 is unknown', challenge), expectation)).to.deep.equal([]);
    const redirect: RawResponse = { status: 303, headers: { location: 'https://app.example/cb?error=invalid_scope&error_description=caf%25C3%25A9&iss=http%3A%2F%2F127.0.0.1%3A1' }, text: '' };
    expect(responseProblems(request, redirect, expectation)).to.deep.equal([]);
  });

  it('flags a non-ASCII character, a double quote or a backslash, escaped in a challenge or not', () => {
    expect(responseProblems(request, refusal('café is unknown'), expectation).join()).to.match(/a JSON error with an error_description with characters/);
    expect(responseProblems(request, refusal('say "no"'), expectation).join()).to.match(/a JSON error with an error_description/);
    const challenge = 'Bearer realm="oauth", error="invalid_token", error_description="a \\"quoted\\" word"';
    expect(responseProblems(request, refusal('a word', challenge), expectation).join()).to.match(/a challenge with an error_description/);
    const redirect: RawResponse = { status: 303, headers: { location: 'https://app.example/cb?error=invalid_scope&error_description=caf%C3%A9&iss=http%3A%2F%2F127.0.0.1%3A1' }, text: '' };
    expect(responseProblems(request, redirect, expectation).join()).to.match(/a redirect with an error_description/);
  });
});
