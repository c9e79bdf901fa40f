import { expect } from 'chai';
import fc, { type Arbitrary } from 'fast-check';

import { applyMutations, encodedJunk, FORM, formBytesOf, formPlan, headerJunk, mutations, pairsOf, queryOf } from './harness.ts';
import { applyTweak, headerSafe, nearMiss, type Tweak } from './credentials.ts';
import { BROWSER_ACCEPT, header } from './checks.ts';
import { anonymousLogoutSession, parkedForm, slidingSession, type StoreDifference } from './store_snapshot.ts';
import type { RawRequest, RawResponse } from './http.ts';
import { pkcePair, REDIRECT_URI } from '../support/oauth.ts';
import { headers, mostly, pageAccept, post, type FuzzSuite, type Header } from './suite.ts';

/** Parameters an authorization request may carry besides the ones of a valid request (some of them twice, then). */
const AUTHORIZATION_EXTRAS = [
  'prompt', 'max_age', 'login_hint', 'id_token_hint', 'claims', 'acr_values', 'ui_locales', 'response_mode', 'request', 'request_uri', 'registration',
  'resource', 'display', 'claims_locales', 'dpop_jkt', 'authorization_details', 'nonce', 'state', 'code_challenge', 'scope', 'redirect_uri',
];

function authorizationParams(clientId: string): Record<string, string> {
  const { challenge } = pkcePair();
  return {
    client_id: clientId, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'openid api profile', state: 'fuzz-state',
    code_challenge: challenge, code_challenge_method: 'S256', nonce: 'fuzz-nonce',
  };
}

const AUTHORIZATION_NAMES = Object.keys(authorizationParams('x'));

/** What a consent denial (a redirect back to the authorization endpoint) may change: the interaction it finishes and the session. */
const DENIAL_MAY_CHANGE = new Set(['oidc_models:Interaction', 'oidc_models:Session']);

type Uid = { kind: 'real' } | { kind: 'tweak'; tweak: Tweak } | { kind: 'junk'; value: string };
const uid: Arbitrary<Uid> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Uid>({ kind: 'real' }) },
  { weight: 1, arbitrary: nearMiss.map((tweak): Uid => ({ kind: 'tweak', tweak })) },
  { weight: 1, arbitrary: encodedJunk.map((value): Uid => ({ kind: 'junk', value })) },
);
const uidOf = (plan: Uid, real: string) => (plan.kind === 'real' ? real : plan.kind === 'tweak' ? applyTweak(real, plan.tweak) : plan.value);

type Cookie = { kind: 'real' } | { kind: 'none' } | { kind: 'tweak'; tweak: Tweak } | { kind: 'junk'; value: string };
const cookie: Arbitrary<Cookie> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Cookie>({ kind: 'real' }) },
  { weight: 1, arbitrary: fc.constant<Cookie>({ kind: 'none' }) },
  { weight: 1, arbitrary: nearMiss.map((tweak): Cookie => ({ kind: 'tweak', tweak })) },
  { weight: 1, arbitrary: fc.oneof(headerJunk, headerJunk.map((value) => `_interaction=${value}; _interaction.sig=${value}`)).map((value): Cookie => ({ kind: 'junk', value })) },
);
function cookieOf(plan: Cookie, real: string): Header {
  if (plan.kind === 'none') return undefined;
  if (plan.kind === 'junk') return plan.value;
  return plan.kind === 'real' ? real : headerSafe(applyTweak(real, plan.tweak));
}

/** What a browser meets: the authorization endpoint, the login and consent pages, sign-out. */
export function browserFlows(suite: FuzzSuite): void {
  describe('authorization endpoint', () => {
    it('GET /oauth/authorize around a valid request, with and without a signed-in session', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      /** A refusal: an error status, or a redirect to the client with `error`. */
      const refused = (response: RawResponse) => response.status >= 400 || URL.parse(header(response, 'location') ?? '', w.server.issuer)?.searchParams.has('error') === true;
      await suite.check(fc.asyncProperty(fc.constantFrom('confidential', 'public'), mutations(AUTHORIZATION_NAMES, AUTHORIZATION_EXTRAS), fc.boolean(), pageAccept, async (which, changes, signedIn, accept) => {
        const client = which === 'confidential' ? w.confidential : w.publicClient;
        const query = queryOf(applyMutations(pairsOf(authorizationParams(client.client_id)), changes));
        const request: RawRequest = { method: 'GET', path: `/oauth/authorize?${query}`, headers: headers({ cookie: signedIn ? w.codes.cookieHeader() : undefined, accept }) };
        // Accepted, it starts an interaction (or, signed in and consented, issues a code): both are writes.
        // Refused, the only write is the engine's sliding session expiry, for a request with a session cookie.
        await w.prober.probe('GET /oauth/authorize', request, suite.expectation('html', { acceptedMayWrite: true, refused, allowedChange: slidingSession }));
      }));
    });

    it('POST /oauth/authorize with any body: redirected to a GET naming the form kept for it, or the error page, and nothing else stored', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      await suite.check(fc.asyncProperty(formPlan(AUTHORIZATION_NAMES, AUTHORIZATION_EXTRAS), mostly(FORM), pageAccept, async (plan, contentType, accept) => {
        const request = post('/oauth/authorize', formBytesOf(plan, authorizationParams(w.confidential.client_id)), contentType, { cookie: w.codes.cookieHeader(), accept });
        await w.prober.probe('POST /oauth/authorize', request, suite.expectation('html', { allowedChange: parkedForm }));
      }), 1, [
        // Found: a body over 56 KiB that is not a form got the host's JSON 413 instead of the error page (fixed in src/http/errors.ts).
        [{ kind: 'other', bytes: Buffer.from(`${'x'.repeat(70_000)}=1`) }, 'text/plain', BROWSER_ACCEPT],
      ]);
    });
  });

  describe('login and consent pages', () => {
    it('GET /interaction/:uid with any uid, suffix and cookies', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const suffix = fc.oneof({ weight: 6, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom('/', '/login', '/consent', '/..', '/%2e%2e', '?x=%FF') });
      await suite.check(fc.asyncProperty(fc.boolean(), uid, suffix, cookie, pageAccept, async (consent, uidPlan, tail, cookiePlan, accept) => {
        const page = consent ? await w.pages.consent() : await w.pages.login();
        const request: RawRequest = { method: 'GET', path: `/interaction/${uidOf(uidPlan, page.uid)}${tail}`, headers: headers({ cookie: cookieOf(cookiePlan, page.cookie), accept }) };
        // A suffix naming a form's path is a route for POST only: the plain 404.
        await w.prober.probe('GET /interaction/:uid', request, suite.expectation('html', { missingRoute: true }));
      }));
    });

    it('POST /interaction/:uid/login with junk forms: the login page again or the error page, nobody signed in, nothing stored', async function () {
      // Each case that passes the CSRF check hashes a password: half the run count.
      this.timeout(suite.timeout(0.5));
      const w = suite.world();
      await suite.check(fc.asyncProperty(formPlan(['csrf', 'email', 'password'], ['remember']), mostly(FORM), uid, cookie, pageAccept, async (plan, contentType, uidPlan, cookiePlan, accept) => {
        const page = await w.pages.login();
        // Everything valid but the password, which no change can make right.
        const form = { csrf: page.csrf, email: w.user.email, password: 'not the password' };
        const request = post(`/interaction/${uidOf(uidPlan, page.uid)}/login`, formBytesOf(plan, form), contentType, { cookie: cookieOf(cookiePlan, page.cookie), accept });
        const response = await w.prober.probe('POST /interaction/:uid/login', request, suite.expectation('html', { missingRoute: true }));
        expect(response.refused, `a sign-in without the password was accepted: ${response.status} ${header(response, 'location')}`).to.equal(true);
      }), 0.5);
    });

    it('POST /interaction/:uid/consent with junk forms: the consent page again, the error page, or a denial', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      await suite.check(fc.asyncProperty(formPlan(['csrf', 'decision', 'workspace']), mostly(FORM), uid, cookie, pageAccept, async (plan, contentType, uidPlan, cookiePlan, accept) => {
        const page = await w.pages.consent();
        // Everything valid but the workspace: one that exists and is not the user's.
        const form = { csrf: page.csrf, decision: 'allow', workspace: w.otherWorkspaceId };
        const request = post(`/interaction/${uidOf(uidPlan, page.uid)}/consent`, formBytesOf(plan, form), contentType, { cookie: cookieOf(cookiePlan, page.cookie), accept });
        // Any decision but `allow` is a denial: it finishes the interaction (a write) and goes back to the client with access_denied.
        // A redirect is store-checked too: it may finish the interaction and slide the session, nothing else (a Grant or a
        // grant's workspace written would be consent given for a workspace that is not the user's).
        const redirected = (response: RawResponse) => response.status >= 300 && response.status < 400;
        const response = await w.prober.probe('POST /interaction/:uid/consent', request, suite.expectation('html', {
          acceptedMayWrite: true, missingRoute: true,
          refused: (r) => r.status >= 400 || redirected(r),
          allowedChange: (differences, r) => redirected(r) && differences.every(({ group }) => DENIAL_MAY_CHANGE.has(group)),
        }));
        if (response.status >= 300 && response.status < 400) {
          w.pages.finished(page);
          expect(header(response, 'location'), 'allowed for a workspace that is not the user\'s').to.match(/\/oauth\/authorize\//);
        }
      }));
    });
  });

  describe('logout', () => {
    it('GET and POST /oauth/logout (and its confirmation) with any parameters, signed in or not', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const discovery = await (await fetch(`${w.server.issuer}/.well-known/openid-configuration`)).json() as { end_session_endpoint?: string };
      // Without RP-initiated logout the route does not exist: the engine's plain 404.
      const missingRoute = discovery.end_session_endpoint === undefined;
      const names = ['id_token_hint', 'post_logout_redirect_uri', 'state', 'client_id', 'logout_hint', 'ui_locales'];
      const valid = () => ({ id_token_hint: w.idToken, post_logout_redirect_uri: REDIRECT_URI, state: 'fuzz-state', client_id: w.confidential.client_id, logout_hint: w.user.email, ui_locales: 'en' });
      const confirmNames = ['xsrf', 'logout', 'rpinitiated'];
      await suite.check(fc.asyncProperty(fc.constantFrom('GET', 'POST', 'confirm'), mutations(names, confirmNames), formPlan(confirmNames, names), mostly(FORM), fc.boolean(), pageAccept, async (kind, changes, confirmPlan, contentType, signedIn, accept) => {
        const sessionCookie = signedIn ? w.codes.cookieHeader() : undefined;
        const pairs = applyMutations(pairsOf(valid()), changes);
        const request: RawRequest = kind === 'GET'
          ? { method: 'GET', path: `/oauth/logout?${queryOf(pairs)}`, headers: headers({ cookie: sessionCookie, accept }) }
          : kind === 'POST'
            ? post('/oauth/logout', Buffer.from(queryOf(pairs), 'latin1'), contentType, { cookie: sessionCookie, accept })
            : post('/oauth/logout/confirm', formBytesOf(confirmPlan, { xsrf: 'x', logout: 'yes', rpinitiated: 'true' }), contentType, { cookie: sessionCookie, accept });
        // A sign-out that goes ahead changes the session; one refused changes nothing but the session's sliding expiry.
        const anonymous = anonymousLogoutSession(request);
        const allowedChange = (differences: readonly StoreDifference[], response: RawResponse) => slidingSession(differences) || anonymous(differences, response) || parkedForm(differences, response);
        await w.prober.probe(`${kind} /oauth/logout`, request, suite.expectation('html', { acceptedMayWrite: signedIn, missingRoute, allowedChange }));
      }));
    });
  });
}
