import fc, { type Arbitrary } from 'fast-check';

import {
  applyMutations, encodedJunk, encodeText, FORM, formBytesOf, formEncode, formPlan, JSON_TYPE, jsonPlan, jsonTextOf, junkText, mutations, pairsOf, queryOf,
  textEncodings, type Mutation,
} from './harness.ts';
import { applyTweak, authorizationOf, authPlan, tweaks, type Tweak } from './credentials.ts';
import { createCompany, type FuzzWorld } from './fixtures.ts';
import type { RawRequest, RawResponse } from './http.ts';
import { requestHaystack } from './checks.ts';
import { anonymousLogoutSession, parkedForm, type StoreDifference } from './store_snapshot.ts';
import { headers, mostly, post, type FuzzSuite } from './suite.ts';

const COMPANY = { name: 'Fuzz Co', domainName: 'fuzz.example', employees: 12, city: 'Lyon', idealCustomerProfile: true };
const person = (w: FuzzWorld) => ({ firstName: 'Ann', lastName: 'Lee', email: 'ann@fuzz.example', phone: '+33 1 23', jobTitle: 'CTO', city: 'Lyon', companyId: w.companyId });
const OTHER_KEYS = ['id', 'createdAt', 'updatedAt', 'workspaceId', 'workspace_id', '__proto__', 'constructor'];

type Path = { kind: 'fixed'; path: string } | { kind: 'record'; object: string; tweak: Tweak } | { kind: 'junk'; template: string; value: string };

/** Path segments: escaped junk mostly (raw bytes over 0x7f are refused by Node's parser before the service sees them). */
const segment = fc.oneof({ weight: 4, arbitrary: junkText.map(formEncode) }, { weight: 1, arbitrary: encodedJunk });

const dataApiPath: Arbitrary<Path> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('/rest/companies', '/rest/people', '/rest/metadata/objects', '/rest/metadata/objects/companies', '/rest/metadata/objects/people').map((p): Path => ({ kind: 'fixed', path: p })) },
  { weight: 1, arbitrary: fc.constantFrom('/rest', '/rest/', '/rest//companies', '/rest/companies/', '/rest/companies/../people', '/rest/metadata', '/rest/COMPANIES', '/rest/companies?', '/rest/companies;x').map((p): Path => ({ kind: 'fixed', path: p })) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('record' as const), object: fc.constantFrom('companies', 'people', 'metadata/objects'), tweak: tweaks(4) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('junk' as const), template: fc.constantFrom('/rest/{}', '/rest/companies/{}', '/rest/people/{}', '/rest/metadata/objects/{}', '/rest/{}/{}', '/rest/companies/{}/x'), value: segment }) },
);

function pathOf(w: FuzzWorld, plan: Path): string {
  if (plan.kind === 'fixed') return plan.path;
  if (plan.kind === 'record') return `/rest/${plan.object}/${formEncode(applyTweak(w.companyId, plan.tweak))}`;
  return plan.template.replaceAll('{}', plan.value);
}

/** The protected resources (userinfo, the data API) and every other path. */
export function resources(suite: FuzzSuite): void {
  describe('userinfo', () => {
    it('GET and POST /oauth/userinfo with any credential, in the header or the form, and any body', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      await suite.check(fc.asyncProperty(fc.constantFrom('GET', 'POST'), authPlan({ exact: 4, none: 2, realBearer: 8, kids: w.kids }), formPlan(['access_token']), mostly(FORM), fc.boolean(), async (method, auth, plan, contentType, withBody) => {
        const authorization = authorizationOf(auth, { tokens: [w.userAccessToken, w.machineToken, w.apiKey, w.refreshToken, w.idToken] });
        const request: RawRequest = method === 'POST' && withBody
          ? post('/oauth/userinfo', formBytesOf(plan, { access_token: w.userAccessToken }), contentType, { authorization })
          : { method, path: '/oauth/userinfo', headers: headers({ authorization }) };
        await w.prober.probe(`${method} /oauth/userinfo`, request, suite.expectation('bearer'));
      }));
    });
  });

  describe('data API', () => {
    const method = fc.oneof({ weight: 3, arbitrary: fc.constantFrom('GET', 'POST', 'PATCH') }, { weight: 1, arbitrary: fc.constantFrom('DELETE', 'PUT', 'OPTIONS', 'HEAD') });
    const query: Arbitrary<Mutation[] | null> = fc.option(mutations(['limit', 'starting_after'], ['offset', 'sort', 'filter', 'cursor']));

    it('/rest and /rest/metadata: any method, path, query, credential and JSON body', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const body = jsonPlan([...Object.keys(COMPANY), ...Object.keys(person(w))], OTHER_KEYS);
      const auth = authPlan({ exact: 6, none: 1, realBearer: 20, kids: w.kids });
      // What the accepted writes stored, which a later list or read shows back.
      const written: string[] = [];
      const stored = () => written.join('\n');
      await suite.check(fc.asyncProperty(method, dataApiPath, query, auth, body, textEncodings, mostly(JSON_TYPE), fc.boolean(), async (verb, pathPlan, queryChanges, authorizationPlan, bodyPlan, encoding, contentType, preflight) => {
        const target = pathOf(w, pathPlan);
        const valid = target.includes('/people') ? person(w) : COMPANY;
        const search = queryChanges ? `?${queryOf(applyMutations(pairsOf({ limit: '2', starting_after: 'AAAA' }), queryChanges))}` : '';
        const authorization = authorizationOf(authorizationPlan, { tokens: [w.apiKey, w.userAccessToken, w.machineToken] });
        const withBody = verb === 'POST' || verb === 'PATCH' || verb === 'PUT';
        const cors = verb === 'OPTIONS' && preflight ? { origin: 'https://spa.example', 'access-control-request-method': 'PATCH', 'access-control-request-headers': 'authorization, content-type' } : {};
        const request: RawRequest = {
          method: verb,
          path: `${target}${search}`,
          headers: headers({ authorization, ...(withBody ? { 'content-type': contentType } : {}), ...cors }),
          ...(withBody ? { body: encodeText(jsonTextOf(bodyPlan, valid), encoding) } : {}),
        };
        const writes = verb === 'POST' || verb === 'PATCH' || verb === 'DELETE';
        const response = await w.prober.probe(`${verb} /rest`, request, suite.expectation('bearer', { acceptedMayWrite: writes, stored }));
        if (withBody && response.status < 300) written.push(requestHaystack(request));
        if (verb === 'DELETE' && response.status === 200 && target.endsWith(w.companyId)) w.companyId = await createCompany(w.server, w.apiKey);
      }));
    });
  });

  describe('everything else', () => {
    it('wrong methods, unknown and odd paths under every prefix', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const prefixes = [
        '/oauth/token', '/oauth/authorize', '/oauth/revoke', '/oauth/introspect', '/oauth/userinfo', '/oauth/register', '/oauth/jwks', '/oauth/logout',
        '/oauth/par', '/oauth/device/auth', '/oauth/backchannel', '/interaction', '/.well-known/openid-configuration', '/.well-known/oauth-protected-resource',
        '/healthz', '/readyz', '/metrics', '/settings', '/rest', '', '/oauth',
      ];
      const tails = fc.oneof(fc.constantFrom('', '/', '//', '/..', '/../rest/companies', '%2F', ';a=b', '/x', '?%FF', '#x', '/%00', '.json', '/%2e%2e/%2e%2e/etc/passwd'), encodedJunk.map((junk) => `/${junk}`));
      const methods = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'PROPFIND', 'QUERY', 'SEARCH');
      await suite.check(fc.asyncProperty(methods, fc.constantFrom(...prefixes), tails, mostly(FORM), fc.uint8Array({ maxLength: 64 }), async (verb, prefix, tail, contentType, bytes) => {
        const hasBody = verb !== 'GET' && verb !== 'HEAD';
        const request: RawRequest = { method: verb, path: `${prefix}${tail}` || '/', headers: headers(hasBody ? { 'content-type': contentType } : {}), ...(hasBody ? { body: Buffer.from(bytes) } : {}) };
        // Who answers is not known here: a page or JSON, and the engine's plain 404 for a route it does not have.
        // The metrics exposition names internals (error classes counted) by design: it is the operator's.
        const showsInternals = (_: RawRequest, response: RawResponse) => request.path.startsWith('/metrics') && response.status === 200;
        // A form posted to the authorization or logout endpoint (`#x` is no part of the path) is kept for the GET its 303 names.
        const anonymous = anonymousLogoutSession(request);
        const allowedChange = (differences: readonly StoreDifference[], response: RawResponse) => anonymous(differences, response) || parkedForm(differences, response);
        await w.prober.probe(`${verb} other paths`, request, suite.expectation('any', { missingRoute: true, showsInternals, allowedChange }));
      }));
    });
  });
}
