import { expect } from 'chai';

import { requestNaming } from '../support/named_host.ts';
import { REDIRECT_URI, codeRequest, registerClient } from '../support/oauth.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';
import { UserAgent } from '../support/user_agent.ts';

const PUBLIC_ISSUER = 'https://auth.example.com';
const FORWARDED = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'auth.example.com' };
/** An https issuer must be given its key-encryption key: the service makes none for a deployment. */
const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 13).toString('base64url');

async function discovery(server: TestServer): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.origin}/.well-known/oauth-authorization-server`, { headers: FORWARDED });
  return response.json() as Promise<Record<string, unknown>>;
}

/** The newest request log line for `path`; the log is written asynchronously, so it may take a moment to appear. */
async function requestLogLine(server: TestServer, path: string): Promise<string> {
  for (const deadline = Date.now() + 3000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 50))) {
    const line = server.logs().split('\n').reverse().find((entry) => entry.includes(`"path":"${path}"`) && entry.includes('"ip"'));
    if (line) return line;
  }
  throw new Error(`no request log line for ${path}:\n${server.logs()}`);
}

describe('behind a TLS-terminating reverse proxy', () => {
  let trusting: TestServer;
  let untrusting: TestServer;

  before(async () => {
    [trusting, untrusting] = await Promise.all([
      startServer({ env: { BASE_URL: PUBLIC_ISSUER, TRUST_PROXY: 'true', KEY_ENCRYPTION_KEY } }),
      startServer({ env: { BASE_URL: PUBLIC_ISSUER, TRUST_PROXY: 'false', KEY_ENCRYPTION_KEY } }),
    ]);
  });

  after(async () => {
    await Promise.all([trusting.stop(), untrusting.stop()]);
  });

  it('with TRUST_PROXY, publishes the public https endpoints the proxy forwards for', async () => {
    const metadata = await discovery(trusting);
    expect(metadata.issuer).to.equal(PUBLIC_ISSUER);
    expect(metadata.authorization_endpoint).to.equal(`${PUBLIC_ISSUER}/oauth/authorize`);
    expect(metadata.token_endpoint).to.equal(`${PUBLIC_ISSUER}/oauth/token`);
  });

  it('with TRUST_PROXY, marks its cookies Secure and sends HSTS', async () => {
    const client = await registerClient(trusting.origin, { redirect_uris: [REDIRECT_URI] });
    const { url } = codeRequest(trusting.origin, client.client_id, { scope: undefined, state: undefined });
    const response = await fetch(url, { headers: FORWARDED, redirect: 'manual' });
    expect(response.status).to.equal(303);
    const cookies = response.headers.getSetCookie();
    expect(cookies).to.not.be.empty;
    for (const cookie of cookies) expect(cookie).to.match(/;\s*secure/i);
    expect(response.headers.get('strict-transport-security')).to.equal('max-age=31536000; includeSubDomains');
  });

  it('without TRUST_PROXY too, marks its cookies Secure and sends HSTS for an https issuer (no proxy header needed)', async () => {
    const client = await registerClient(untrusting.origin, { redirect_uris: [REDIRECT_URI] });
    const { url } = codeRequest(untrusting.origin, client.client_id);
    const response = await fetch(url, { redirect: 'manual' });
    const cookies = response.headers.getSetCookie();
    expect(cookies).to.not.be.empty;
    for (const cookie of cookies) expect(cookie).to.match(/;\s*secure/i);
    expect(response.headers.get('strict-transport-security')).to.equal('max-age=31536000; includeSubDomains');
  });

  it('names the session cookie __Host-session for an https issuer: Secure, Path=/ and no Domain, so no subdomain can plant one', async () => {
    const user = await seedUser(untrusting);
    const client = await registerClient(untrusting.origin, { redirect_uris: [REDIRECT_URI] });
    const agent = new UserAgent();
    // The server names its public https URLs; this test reaches it on loopback.
    const local = (url: string) => new URL(url, PUBLIC_ISSUER).href.replace(PUBLIC_ISSUER, untrusting.origin);
    const authorization = await agent.request(codeRequest(untrusting.origin, client.client_id).url);
    const login = await (await agent.request(local(authorization.headers.get('location')!))).text();
    const action = /<form method="post" action="([^"]+)"/.exec(login)![1]!;
    const csrf = /name="csrf" value="([^"]*)"/.exec(login)![1]!;
    const signedIn = await agent.request(local(action), { form: { csrf, email: user.email, password: user.password } });
    const resumed = await agent.request(local(signedIn.headers.get('location')!));
    const knownDevice = signedIn.headers.getSetCookie().filter((cookie) => /^known_devices(\.sig)?=/.test(cookie));
    expect(knownDevice, 'the known-device cookie (its entries authenticate themselves: no signature), at the sign-in form\'s and the password change\'s paths').to.have.length(2);
    for (const cookie of knownDevice) expect(cookie).to.match(/;\s*secure/i);

    const session = resumed.headers.getSetCookie().filter((cookie) => /^__Host-session(\.sig)?=/.test(cookie));
    expect(session, resumed.headers.getSetCookie().join('\n')).to.have.length(2);
    for (const cookie of session) {
      expect(cookie).to.match(/;\s*secure/i);
      expect(cookie).to.match(/;\s*path=\/(;|$)/i);
      expect(cookie).to.not.match(/;\s*domain=/i);
    }
    expect(resumed.headers.getSetCookie().some((cookie) => cookie.startsWith('_session')), 'no unprefixed session cookie').to.equal(false);
  });

  it('logs the client address the configured number of proxies reports, not one a client put further left', async () => {
    await fetch(`${trusting.origin}/.well-known/openid-configuration`, { headers: { 'x-forwarded-for': '203.0.113.66, 198.51.100.7' } });
    await fetch(`${untrusting.origin}/.well-known/openid-configuration`, { headers: { 'x-forwarded-for': '203.0.113.66' } });
    const trustedLine = await requestLogLine(trusting, '/.well-known/openid-configuration');
    expect(JSON.parse(trustedLine).ip).to.equal('198.51.100.7');
    const untrustedLine = await requestLogLine(untrusting, '/.well-known/openid-configuration');
    expect(JSON.parse(untrustedLine).ip).to.equal('127.0.0.1');
  });

  it('without TRUST_PROXY, still publishes the issuer\'s endpoints whatever the forwarded headers say', async () => {
    const metadata = await discovery(untrusting);
    expect(metadata.issuer).to.equal(PUBLIC_ISSUER);
    expect(metadata.authorization_endpoint).to.equal(`${PUBLIC_ISSUER}/oauth/authorize`);
  });

  it('sends a page asked for under another name of the issuer\'s port to BASE_URL (302), and never one a proxy names by its upstream address', async () => {
    const settings = (server: TestServer, headers: Record<string, string>) => fetch(`${server.origin}/settings?from=proxy`, { headers, redirect: 'manual' });
    const other = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'www.auth.example.com' };
    const redirected = await settings(trusting, other);
    expect(redirected.status).to.equal(302);
    expect(redirected.headers.get('location')).to.equal(`${PUBLIC_ISSUER}/settings?from=proxy`);
    expect(redirected.headers.get('cache-control')).to.equal('no-store');
    const ownName = await settings(trusting, FORWARDED);
    expect(ownName.status, 'the issuer\'s own name: sent to sign in').to.equal(303);
    expect(ownName.headers.get('location')).to.match(new RegExp(`^${PUBLIC_ISSUER}/oauth/authorize\\?`));
    for (const server of [trusting, untrusting]) {
      // No X-Forwarded-Host (or one not believed) and a Host of another port: the proxy's upstream address, not a name to send anyone to.
      expect((await settings(server, server === untrusting ? other : {})).status).to.equal(303);
    }
    const named = await requestNaming('www.auth.example.com', `${untrusting.origin}/settings`);
    expect(named, 'a Host naming another name for port 443').to.deep.equal({ status: 302, location: `${PUBLIC_ISSUER}/settings` });
    expect((await fetch(`${trusting.origin}/.well-known/openid-configuration`, { headers: other })).status, 'an API').to.equal(200);
  });

  describe('every URL derives from BASE_URL, never from the request (no cache poisoning)', () => {
    const URL_FIELDS = ['issuer', 'authorization_endpoint', 'token_endpoint', 'jwks_uri', 'registration_endpoint',
      'revocation_endpoint', 'introspection_endpoint', 'userinfo_endpoint'];
    const forged: Array<{ name: string; headers: Record<string, string> }> = [
      { name: 'Host', headers: { host: 'evil.example' } },
      { name: 'X-Forwarded-Host', headers: { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' } },
      { name: 'Forwarded host and port', headers: { 'x-forwarded-host': 'evil.example:8443', 'x-forwarded-port': '8443' } },
    ];

    for (const { name, headers } of forged) {
      for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
        it(`${path} ignores a forged ${name}, with or without TRUST_PROXY`, async () => {
          for (const server of [trusting, untrusting]) {
            const metadata = await (await fetch(`${server.origin}${path}`, { headers })).json() as Record<string, string>;
            for (const field of URL_FIELDS) {
              expect(metadata[field], field).to.satisfy((url: string) => url.startsWith(PUBLIC_ISSUER));
            }
          }
        });
      }
    }

    it('registration_client_uri, the authorization endpoint\'s redirects and the data API\'s resource_metadata name the issuer', async () => {
      for (const server of [trusting, untrusting]) {
        const registered = await fetch(`${server.origin}/oauth/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', host: 'evil.example', 'x-forwarded-host': 'evil.example' },
          body: JSON.stringify({ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'client_secret_post' }),
        });
        expect(registered.status).to.equal(201);
        const client = await registered.json() as { client_id: string; registration_client_uri: string };
        expect(client.registration_client_uri).to.equal(`${PUBLIC_ISSUER}/oauth/register/${client.client_id}`);

        const { url } = codeRequest(server.origin, client.client_id);
        const authorize = await fetch(url, { headers: { 'x-forwarded-host': 'evil.example' }, redirect: 'manual' });
        const location = authorize.headers.get('location')!;
        expect(location.startsWith('/') || location.startsWith(PUBLIC_ISSUER), location).to.equal(true);

        const api = await fetch(`${server.origin}/rest/companies`, { headers: { host: 'evil.example' } });
        expect(api.headers.get('www-authenticate')).to.include(`resource_metadata="${PUBLIC_ISSUER}/`);
      }
    });
  });
});
