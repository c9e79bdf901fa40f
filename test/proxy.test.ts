import { expect } from 'chai';

import { REDIRECT_URI, codeRequest, registerClient } from './helpers/oauth.ts';
import { startServer, type TestServer } from './helpers/server.ts';

const PUBLIC_ISSUER = 'https://auth.example.com';
const FORWARDED = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'auth.example.com' };

async function discovery(server: TestServer): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.origin}/.well-known/oauth-authorization-server`, { headers: FORWARDED });
  return response.json() as Promise<Record<string, unknown>>;
}

describe('behind a TLS-terminating reverse proxy', () => {
  let trusting: TestServer;
  let untrusting: TestServer;

  before(async () => {
    [trusting, untrusting] = await Promise.all([
      startServer({ env: { BASE_URL: PUBLIC_ISSUER, TRUST_PROXY: 'true' } }),
      startServer({ env: { BASE_URL: PUBLIC_ISSUER, TRUST_PROXY: 'false' } }),
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
    expect(response.headers.get('strict-transport-security')).to.match(/max-age=\d+/);
  });

  it('without TRUST_PROXY, ignores forwarded headers a client could forge', async () => {
    const metadata = await discovery(untrusting);
    expect(metadata.issuer).to.equal(PUBLIC_ISSUER);
    expect(metadata.authorization_endpoint).to.equal(`http://127.0.0.1:${new URL(untrusting.origin).port}/oauth/authorize`);
  });
});
