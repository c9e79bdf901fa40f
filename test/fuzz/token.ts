import { expect } from 'chai';
import fc from 'fast-check';

import { FORM, formBytesOf, formPlan, type FormPlan } from './harness.ts';
import { applyTweak, authorizationOf, authPlan, nearMiss, tweaks, type AuthPlan, type LiveCredentials, type Tweak } from './credentials.ts';
import { header, type ProbeResult } from './checks.ts';
import type { FuzzWorld } from './fixtures.ts';
import { REDIRECT_URI } from '../support/oauth.ts';
import { mostly, post, type FuzzSuite, type Header } from './suite.ts';

/** A wire name or value decoded as a form parser would (an invalid escape stays as it is: it cannot equal a valid value). */
function formDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/** The parameters of a form body as a form parser reads them: split on `&` and the first `=`, decoded. */
function formPairs(body: Buffer): Array<readonly [string, string]> {
  return body.toString('latin1').split('&').filter(Boolean).map((part) => {
    const eq = part.indexOf('=');
    return eq < 0 ? [formDecode(part), ''] as const : [formDecode(part.slice(0, eq)), formDecode(part.slice(eq + 1))] as const;
  });
}

/**
 * Whether a form body around `valid` must be refused whatever else it says: a parameter sent
 * twice, a required one missing, or one that must match exactly (a code, a secret) changed.
 */
function mustRefuse(plan: FormPlan, body: Buffer, valid: Record<string, string>, required: readonly string[], exact: readonly string[]): boolean {
  if (plan.kind !== 'around') return false;
  const pairs = formPairs(body);
  return Object.keys(valid).some((name) => {
    const values = pairs.filter(([n]) => n === name).map(([, value]) => value);
    if (values.length > 1) return true;
    if (values.length === 0) return required.includes(name);
    return exact.includes(name) && values[0] !== valid[name];
  });
}

interface TokenCase {
  label: string;
  valid: Record<string, string>;
  plan: FormPlan;
  contentType: Header;
  auth: AuthPlan;
  live: LiveCredentials;
  acceptedMayWrite: boolean;
  required: readonly string[];
  exact: readonly string[];
  /** Keeps the fixtures in step with what the answer did, before anything is asserted (a failed assertion leaves them right). */
  follow?: (response: ProbeResult) => Promise<void> | void;
}

/** The valid request itself: no change to the form, the form content type, the client's credentials in the body only. */
const UNCHANGED: [FormPlan, Header, AuthPlan] = [{ kind: 'around', changes: [] }, FORM, { kind: 'none' }];

const isUnchanged = (c: TokenCase) => c.plan.kind === 'around' && c.plan.changes.length === 0 && c.contentType === FORM && c.auth.kind === 'none';

/** A token request built from a plan around `valid`; what must be refused is, and the valid request itself is accepted. */
async function tokenCase(suite: FuzzSuite, c: TokenCase): Promise<void> {
  const w = suite.world();
  const body = formBytesOf(c.plan, c.valid);
  const request = post('/oauth/token', body, c.contentType, { authorization: authorizationOf(c.auth, c.live) });
  const response = await w.prober.probe(c.label, request, suite.expectation('json', { acceptedMayWrite: c.acceptedMayWrite }));
  await c.follow?.(response);
  if (mustRefuse(c.plan, body, c.valid, c.required, c.exact)) {
    expect(response.refused, `accepted a request it must refuse (${JSON.stringify(c.plan)}): ${response.text.slice(0, 200)}`).to.equal(true);
  }
  // Run first (suite.check's examples): a fixture that made every request fail would otherwise pass unnoticed.
  if (isUnchanged(c)) expect(response.status, `the valid request itself was refused: ${response.text.slice(0, 200)}`).to.equal(200);
  if (response.status === 200) expect(header(response, 'cache-control')).to.equal('no-store');
}

const clientOf = (w: FuzzWorld, which: 'confidential' | 'basic' | 'public') => (which === 'confidential' ? w.confidential : which === 'basic' ? w.basic : w.publicClient);

/** The token endpoint with each grant type, revocation (RFC 7009) and introspection (RFC 7662). */
export function tokenEndpoints(suite: FuzzSuite): void {
  describe('token endpoint', () => {
    it('authorization_code around a valid redemption', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const names = ['grant_type', 'code', 'redirect_uri', 'code_verifier', 'client_id', 'client_secret'];
      await suite.check(fc.asyncProperty(formPlan(names, ['scope', 'resource', 'code_challenge']), mostly(FORM), authPlan({ none: 40 }), async (plan, contentType, auth) => {
        const code = await w.codes.current();
        const client = w.confidential;
        await tokenCase(suite, {
          label: 'POST /oauth/token authorization_code',
          valid: { grant_type: 'authorization_code', code: code.code, redirect_uri: REDIRECT_URI, code_verifier: code.verifier, client_id: client.client_id, client_secret: client.client_secret! },
          plan, contentType, auth, live: { clientId: client.client_id, clientSecret: client.client_secret! },
          acceptedMayWrite: true, required: names, exact: names,
          follow: (response) => {
            if (response.status === 200) w.codes.used();
          },
        });
      }), 1, [UNCHANGED]);
    });

    it('refresh_token around a valid refresh', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const names = ['grant_type', 'refresh_token', 'client_id', 'client_secret', 'scope'];
      const required = ['grant_type', 'refresh_token', 'client_id', 'client_secret'];
      await suite.check(fc.asyncProperty(formPlan(names, ['resource', 'code', 'redirect_uri']), mostly(FORM), authPlan({ none: 40 }), async (plan, contentType, auth) => {
        const client = w.confidential;
        await tokenCase(suite, {
          label: 'POST /oauth/token refresh_token',
          valid: { grant_type: 'refresh_token', refresh_token: w.refreshToken, client_id: client.client_id, client_secret: client.client_secret!, scope: 'openid api profile' },
          plan, contentType, auth, live: { clientId: client.client_id, clientSecret: client.client_secret! },
          acceptedMayWrite: true, required, exact: required,
          // The refresh token rotates: the fixture follows it (the old one, presented again, would revoke the grant).
          follow: async (response) => {
            if (response.status === 200) w.refreshToken = (JSON.parse(response.text) as { refresh_token: string }).refresh_token;
          },
        });
      }), 1, [UNCHANGED]);
    });

    it('client_credentials around a valid request (issuing such a token stores nothing)', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const names = ['grant_type', 'client_id', 'client_secret', 'scope'];
      const required = ['grant_type', 'client_id', 'client_secret'];
      await suite.check(fc.asyncProperty(formPlan(names, ['resource', 'audience', 'workspace_id', 'refresh_token']), mostly(FORM), authPlan({ none: 40 }), async (plan, contentType, auth) => {
        const client = w.machine;
        await tokenCase(suite, {
          label: 'POST /oauth/token client_credentials',
          valid: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret!, scope: 'api' },
          plan, contentType, auth, live: { clientId: client.client_id, clientSecret: client.client_secret! },
          acceptedMayWrite: false, required, exact: required,
        });
      }), 1, [UNCHANGED]);
    });

    it('unknown and unsupported grant types, any body, any client authentication: always refused', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const grantTypes = fc.oneof(
        fc.constantFrom(
          'password', 'implicit', 'urn:ietf:params:oauth:grant-type:device_code', 'urn:ietf:params:oauth:grant-type:jwt-bearer', 'urn:ietf:params:oauth:grant-type:token-exchange',
          'urn:openid:params:grant-type:ciba', 'AUTHORIZATION_CODE', 'authorization_code ', 'refresh_token', 'authorization_code', 'client_credentials', '',
        ),
        fc.string({ unit: 'binary', maxLength: 20 }),
      );
      const extras = ['scope', 'code', 'refresh_token', 'username', 'password'];
      await suite.check(fc.asyncProperty(grantTypes, fc.constantFrom('confidential', 'basic', 'public'), formPlan(['grant_type', 'client_id', 'client_secret'], extras), mostly(FORM), authPlan({ none: 3, exact: 2 }), async (grantType, which, plan, contentType, auth) => {
        const client = clientOf(w, which);
        const valid = { grant_type: grantType, client_id: client.client_id, client_secret: client.client_secret ?? '' };
        const request = post('/oauth/token', formBytesOf(plan, valid), contentType, { authorization: authorizationOf(auth, { clientId: client.client_id, clientSecret: client.client_secret ?? '' }) });
        const response = await w.prober.probe('POST /oauth/token other grants', request, suite.expectation('json'));
        expect(response.refused, `no grant could be given: ${response.text.slice(0, 200)}`).to.equal(true);
      }));
    });
  });

  describe('revocation and introspection', () => {
    /** A token to send: another client's real one, or a near miss of any (never the caller's own token as it is: revoking it is a write). */
    type TokenPick = { slot: 'user' | 'machine' | 'refresh'; tweak: Tweak };
    const othersTokens = fc.record({ slot: fc.constantFrom<'user' | 'machine'>('user', 'machine'), tweak: tweaks(2) });
    const ownNearMiss = fc.record({ slot: fc.constant<'refresh'>('refresh'), tweak: nearMiss });
    const tokenOf = (w: FuzzWorld, pick: TokenPick) => applyTweak(pick.slot === 'user' ? w.userAccessToken : pick.slot === 'machine' ? w.machineToken : w.refreshToken, pick.tweak);
    const hints = fc.constantFrom('refresh_token', 'access_token', 'id_token', '', 'urn:ietf:params:oauth:token-type:jwt');
    const names = ['token', 'token_type_hint', 'client_id', 'client_secret'];

    it('POST /oauth/revoke: junk, near-miss and other clients\' tokens change nothing', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      await suite.check(fc.asyncProperty(fc.oneof(othersTokens, ownNearMiss), hints, formPlan(names), mostly(FORM), authPlan({ none: 30 }), async (pick, hint, plan, contentType, auth) => {
        const client = w.confidential;
        const valid = { token: tokenOf(w, pick), token_type_hint: hint, client_id: client.client_id, client_secret: client.client_secret! };
        const request = post('/oauth/revoke', formBytesOf(plan, valid), contentType, { authorization: authorizationOf(auth, { clientId: client.client_id, clientSecret: client.client_secret! }) });
        await w.prober.probe('POST /oauth/revoke', request, suite.expectation('json'));
      }));
    });

    it('POST /oauth/introspect: any token, any client authentication', async function () {
      this.timeout(suite.timeout());
      const w = suite.world();
      const anyToken = fc.oneof(othersTokens, fc.record({ slot: fc.constant<'refresh'>('refresh'), tweak: tweaks(2) }));
      await suite.check(fc.asyncProperty(anyToken, hints, fc.constantFrom('confidential', 'basic', 'public'), formPlan(names), mostly(FORM), authPlan({ none: 30, exact: 2 }), async (pick, hint, which, plan, contentType, auth) => {
        const client = clientOf(w, which);
        const valid = { token: tokenOf(w, pick), token_type_hint: hint, client_id: client.client_id, client_secret: client.client_secret ?? '' };
        const request = post('/oauth/introspect', formBytesOf(plan, valid), contentType, { authorization: authorizationOf(auth, { clientId: client.client_id, clientSecret: client.client_secret ?? '' }) });
        await w.prober.probe('POST /oauth/introspect', request, suite.expectation('json'));
      }));
    });
  });
}
