import { expect } from 'chai';
import type { Page } from 'playwright-core';

import { browserForSuite, captureRedirect, signIn } from '../support/browser.ts';
import { REDIRECT_URI, codeRequest, exchangeCode, registerClient } from '../support/oauth.ts';
import { PHONE } from '../support/page_audit.ts';
import { requestNaming } from '../support/named_host.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';

/**
 * BASE_URL names `localhost`; the browser opens the server at `127.0.0.1`, the same port. Every
 * page is sent to BASE_URL (302, same path and query) before it shows a form, so the sign-in ends
 * at BASE_URL, where its cookie and its next steps belong. The APIs answer at either name.
 */
describe('pages opened under another name than BASE_URL\'s', function () {
  this.timeout(60_000);

  let server: TestServer;
  const { open } = browserForSuite({ viewport: PHONE });

  before(async function () {
    server = await startServer({ issuerHost: 'localhost' });
    expect(new URL(server.issuer).hostname).to.equal('localhost');
    expect(new URL(server.origin).hostname).to.equal('127.0.0.1');
  });

  after(async function () {
    await server?.stop();
  });

  /** The server's first answer to `url`, as the browser received it. */
  const answerTo = (page: Page, url: string) => page.waitForResponse((response) => response.url() === url);

  it('sends the settings area from 127.0.0.1 to localhost before the sign-in form, and the sign-in ends there', async function () {
    const user = await seedUser(server, [{ workspace: 'Another Name Ltd' }]);
    const page = await open();
    const asked = `${server.origin}/settings`;
    const first = answerTo(page, asked);
    await page.goto(asked);
    const redirect = await first;
    expect(redirect.status()).to.equal(302);
    expect(redirect.headers().location).to.equal(`${server.issuer}/settings`);

    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(new URL(page.url()).host, 'the form is shown at BASE_URL').to.equal(new URL(server.issuer).host);
    await signIn(page, user);
    await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
    expect(page.url()).to.equal(`${server.issuer}/settings`);
    const cookieHosts = new Set((await page.context().cookies()).map((cookie) => cookie.domain));
    expect([...cookieHosts], 'every cookie is BASE_URL\'s').to.deep.equal(['localhost']);
  });

  it('sends an authorization request from 127.0.0.1 to localhost with the same query, and the flow completes', async function () {
    const user = await seedUser(server, [{ workspace: 'Authorize Elsewhere' }]);
    const client = await registerClient(server.origin, { client_name: 'Another Name App' });
    const auth = codeRequest(server.origin, client.client_id);
    const page = await open();
    const capture = await captureRedirect(page, REDIRECT_URI);

    const first = answerTo(page, auth.url);
    await page.goto(auth.url);
    const redirect = await first;
    expect(redirect.status()).to.equal(302);
    const location = new URL(redirect.headers().location!);
    expect(location.origin).to.equal(new URL(server.issuer).origin);
    expect(location.pathname).to.equal('/oauth/authorize');
    expect(location.search, 'the same query').to.equal(new URL(auth.url).search);

    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await signIn(page, user);
    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    const callback = (await capture.next()).url;
    expect(callback.searchParams.get('state')).to.equal(new URL(auth.url).searchParams.get('state'));
    const exchanged = await exchangeCode(server.origin, client, callback.searchParams.get('code')!, auth.verifier);
    expect(exchanged.status, 'the token endpoint answers at 127.0.0.1').to.equal(200);
  });

  it('sends the home page and a HEAD too; answers the APIs at either name, and a Host naming another port as BASE_URL', async function () {
    const issuerHost = new URL(server.issuer).host;
    const elsewhere = new URL(server.origin).host;
    for (const [method, path] of [['GET', '/'], ['HEAD', '/settings'], ['GET', '/oauth/logout?state=x'], ['GET', '/interaction/unknown']]) {
      const answer = await requestNaming(elsewhere, `${server.origin}${path}`, method);
      expect(answer, `${method} ${path}`).to.deep.equal({ status: 302, location: `${server.issuer}${path}` });
    }
    for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server', '/oauth/jwks', '/rest/companies', '/oauth/userinfo', '/readyz']) {
      const answer = await requestNaming(elsewhere, `${server.origin}${path}`);
      expect(answer.status, `GET ${path} is answered where it is asked`).to.be.oneOf([200, 401]);
    }
    const token = await fetch(`${server.origin}/oauth/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'client_credentials' }) });
    expect(token.status, 'the token endpoint answers at 127.0.0.1').to.be.oneOf([400, 401]);
    const metadata = await (await fetch(`${server.origin}/.well-known/openid-configuration`)).json() as { issuer: string };
    expect(metadata.issuer, 'and names BASE_URL').to.equal(server.issuer);

    // A form posted at the other name is not redirected (the redirect would lose it); the pages never show one there.
    expect((await requestNaming(elsewhere, `${server.origin}/interaction/unknown/login`, 'POST')).status).to.not.equal(302);
    // What a proxy names the service by, another port: answered as BASE_URL, never sent round in a loop.
    const upstream = await requestNaming(`127.0.0.1:${Number(new URL(server.origin).port) + 1}`, `${server.origin}/`);
    expect(upstream.status).to.equal(200);
    expect((await requestNaming(issuerHost, `${server.origin}/`)).status, 'BASE_URL\'s own name').to.equal(200);
  });
});
