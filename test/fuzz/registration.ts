import { expect } from 'chai';
import fc, { type Arbitrary } from 'fast-check';

import { acceptHeaders, encodedJunk, encodeText, headerJunk, JSON_TYPE, jsonPlan, jsonTextOf, queryOf, textEncodings } from './harness.ts';
import { applyTweak, authorizationOf, authPlan, nearMiss, type AuthPlan, type Tweak } from './credentials.ts';
import { refusedByHttpLayer } from './checks.ts';
import type { StoreDifference } from './store_snapshot.ts';
import type { FuzzWorld } from './fixtures.ts';
import type { RawRequest, RawResponse } from './http.ts';
import { REDIRECT_URI, registerClient } from '../support/oauth.ts';
import { headers, mostly, post, type FuzzSuite, type Header } from './suite.ts';

/** Client metadata names of RFC 7591, OpenID Connect Registration and the engine, and the ones the server keeps. */
const METADATA_NAMES = [
  'jwks', 'jwks_uri', 'sector_identifier_uri', 'software_statement', 'software_id', 'software_version', 'request_uris', 'post_logout_redirect_uris',
  'userinfo_signed_response_alg', 'id_token_signed_response_alg', 'subject_type', 'application_type', 'default_max_age', 'require_auth_time',
  'default_acr_values', 'initiate_login_uri', 'client_id', 'client_secret', 'client_secret_expires_at', 'client_id_issued_at', 'registration_access_token',
  'registration_client_uri', 'workspace_id', 'redirect_uris_added_at', 'unused_until', 'introspection_audience', 'policy_uri', 'tos_uri', 'client_uri',
  'token_endpoint_auth_signing_alg', 'backchannel_logout_uri', 'frontchannel_logout_uri', 'tls_client_certificate_bound_access_tokens',
  'authorization_signed_response_alg', 'dpop_bound_access_tokens', 'require_pushed_authorization_requests', 'introspection_signed_response_alg',
];

const REGISTRATION = {
  client_name: 'Fuzz registrant',
  redirect_uris: [REDIRECT_URI],
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_post',
  scope: 'api profile',
  logo_uri: 'https://example.com/logo.png',
  contacts: ['ops@example.com'],
};

/** Discovery (RFC 8414, OpenID Connect Discovery), registration (RFC 7591) and its management (RFC 7592). */
export function discoveryAndRegistration(suite: FuzzSuite): void {
  describe('discovery', () => {
    const paths = ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'];

    it('answers the same metadata whatever the query string, Accept, Host and forwarding headers', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const documents = new Map<string, string>();
      for (const path of paths) documents.set(path, await (await fetch(`${w.server.issuer}${path}`)).text());
      const junkHeaders = fc.record({
        accept: acceptHeaders.map((value): Header => value),
        host: fc.option(fc.oneof(fc.constantFrom('evil.example', 'localhost:1', '127.0.0.1', ''), headerJunk), { nil: undefined }),
        'x-forwarded-host': fc.option(headerJunk, { nil: undefined }),
        'x-forwarded-proto': fc.option(fc.constantFrom('https', 'http', 'gopher', ''), { nil: undefined }),
        'if-none-match': fc.option(headerJunk, { nil: undefined }),
      }, { requiredKeys: [] });
      await suite.check(fc.asyncProperty(fc.constantFrom(...paths), fc.array(fc.tuple(encodedJunk, encodedJunk), { maxLength: 4 }), junkHeaders, async (path, query, extra) => {
        const request: RawRequest = { method: 'GET', path: `${path}${query.length ? `?${queryOf(query)}` : ''}`, headers: headers(extra) };
        const response = await w.prober.probe(`GET ${path}`, request, suite.expectation('json'));
        if (refusedByHttpLayer(response)) return;
        expect(response.status, response.text).to.equal(200);
        // Every URL in it comes from BASE_URL, whatever Host or X-Forwarded-Host say.
        expect(response.text).to.equal(documents.get(path));
      }));
    });
  });

  describe('registration (RFC 7591, RFC 7592)', () => {
    it('POST /oauth/register: bad metadata is refused with an RFC 7591 error, whatever the body, encoding and initial access token', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      await suite.check(fc.asyncProperty(jsonPlan(Object.keys(REGISTRATION), METADATA_NAMES), textEncodings, mostly(JSON_TYPE), authPlan({ none: 6 }), async (plan, encoding, contentType, auth) => {
        // Never the initial access token as it is: registering with it would use it up.
        const authorization = authorizationOf(auth, { tokens: [w.initialAccessToken, w.confidential.registration_access_token] });
        const request = post('/oauth/register', encodeText(jsonTextOf(plan, REGISTRATION), encoding), contentType, { authorization, origin: 'https://spa.example' });
        const response = await w.prober.probe('POST /oauth/register', request, suite.expectation('json', { acceptedMayWrite: true }));
        if (response.status === 201) expect(JSON.parse(response.text)).to.have.property('client_id').that.is.a('string');
      }));
    });

    it('GET, PUT, DELETE /oauth/register/:id: good and bad registration access tokens, bad ids, bad updates', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      type Target = { kind: 'own' } | { kind: 'other' } | { kind: 'tweak'; tweak: Tweak } | { kind: 'junk'; value: string };
      const target: Arbitrary<Target> = fc.oneof(
        { weight: 6, arbitrary: fc.constant<Target>({ kind: 'own' }) },
        { weight: 1, arbitrary: fc.constant<Target>({ kind: 'other' }) },
        { weight: 1, arbitrary: nearMiss.map((tweak): Target => ({ kind: 'tweak', tweak })) },
        { weight: 1, arbitrary: encodedJunk.map((value): Target => ({ kind: 'junk', value })) },
      );
      const method = fc.oneof({ weight: 3, arbitrary: fc.constant('GET') }, { weight: 6, arbitrary: fc.constant('PUT') }, { weight: 1, arbitrary: fc.constant('DELETE') });
      const body = jsonPlan(Object.keys(currentMetadata(w)), METADATA_NAMES);
      // Another client whose token and id are mixed with the managed client's (never one the other properties use: it may be changed or deleted).
      const bystander = await registerClient(w.server.issuer, { client_name: 'Fuzz bystander' });
      await suite.check(fc.asyncProperty(method, target, authPlan({ exact: 6, none: 1, realBearer: 12 }), body, textEncodings, mostly(JSON_TYPE), async (verb, to, auth, plan, encoding, contentType) => {
        const managed = w.managed;
        const id = to.kind === 'own' ? managed.client_id : to.kind === 'other' ? bystander.client_id : to.kind === 'tweak' ? applyTweak(managed.client_id, to.tweak) : to.value;
        const authorization = authorizationOf(auth, { tokens: [managed.registration_access_token, bystander.registration_access_token], clientId: managed.client_id, clientSecret: managed.client_secret });
        const request: RawRequest = verb === 'PUT'
          ? { method: 'PUT', path: `/oauth/register/${id}`, headers: headers({ authorization, 'content-type': contentType }), body: encodeText(jsonTextOf(plan, currentMetadata(w)), encoding) }
          : { method: verb, path: `/oauth/register/${id}`, headers: headers({ authorization }) };
        // An id with a slash in it is another path: the engine's plain 404.
        const response = await w.prober.probe(`${verb} /oauth/register/:id`, request, suite.expectation('json', { acceptedMayWrite: verb !== 'GET', allowedChange: tokenForAnotherClient, missingRoute: true }));
        await followManagement(w, verb, id, auth, response);
      }));
    });
  });
}

/** The managed client's metadata as an RFC 7592 update sends it back. */
function currentMetadata(w: FuzzWorld): Record<string, unknown> {
  return {
    client_id: w.managed.client_id,
    client_name: 'Fuzz managed',
    redirect_uris: [REDIRECT_URI],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
    client_secret: w.managed.client_secret,
  };
}

/**
 * By design of the engine (oidc-provider lib/actions/registration.js), a registration access token
 * presented for another client id is destroyed, as one that leaked: the one write a refused RFC
 * 7592 request may make.
 */
function tokenForAnotherClient(differences: readonly StoreDifference[], response: RawResponse): boolean {
  const [only] = differences;
  return response.status === 401 && differences.length === 1 && only!.group === 'oidc_models:RegistrationAccessToken' && only!.removed.length === 1 && only!.added.length === 0;
}

/**
 * Keeps the managed client usable: its registration access token follows each update (they
 * rotate), and a new client replaces it once deleted or once its token was destroyed for being
 * presented for another id (the even token slot is the managed client's).
 */
async function followManagement(w: FuzzWorld, verb: string, id: string, auth: AuthPlan, response: RawResponse): Promise<void> {
  if (verb === 'PUT' && response.status === 200) {
    const updated = JSON.parse(response.text) as { client_id: string; registration_access_token?: string };
    if (updated.client_id === w.managed.client_id && updated.registration_access_token) w.managed.registration_access_token = updated.registration_access_token;
  }
  const deleted = verb === 'DELETE' && response.status === 204;
  const tokenDestroyed = response.status === 401 && auth.kind === 'bearer' && auth.tweak.kind === 'exact' && auth.token % 2 === 0 && id !== w.managed.client_id;
  if (deleted || tokenDestroyed) w.managed = await registerClient(w.server.issuer, { client_name: 'Fuzz managed' });
}
