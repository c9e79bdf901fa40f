import { expect } from 'chai';
import { decodeJwt } from 'jose';
import type { Page } from 'playwright-core';

import { browserForSuite, captureRedirect, signIn } from '../support/browser.ts';
import { api } from '../support/data_api.ts';
import { REDIRECT_URI, codeRequest, exchangeCode, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';

/**
 * Step-up (RFC 6750 section 3.1, RFC 9728): the data API answers a token without the scope it
 * needs with 403 `insufficient_scope` naming the scope and where its metadata is; the client asks
 * again for the union of scopes, the consent page asks only for what is new, in the workspace
 * already chosen, and the one grant grows: the new token has the union, in the same grant.
 */
describe('step-up: asking again for more scopes', function () {
  this.timeout(60_000);

  let server: TestServer;
  const browser = browserForSuite();
  let user: SeededUser;
  let client: RegisteredClient;

  before(async () => {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'First Co', role: 'admin' }, { workspace: 'Second Co', role: 'member' }]);
    client = await registerClient(server.issuer, { client_name: 'Growing App' });
  });

  after(async () => {
    await server?.stop();
  });

  /** Sends the browser to the authorization URL for `scope`; returns the page at the consent page. */
  async function toConsent(page: Page, scope: string, resource?: string): Promise<{ verifier: string; next: () => Promise<URL> }> {
    const capture = await captureRedirect(page, REDIRECT_URI);
    const request = codeRequest(server.issuer, client.client_id, { scope, resource });
    await page.goto(request.url);
    if (await page.getByLabel('Email').isVisible()) await signIn(page, user);
    await page.getByRole('button', { name: 'Allow' }).waitFor();
    return { verifier: request.verifier, next: async () => (await capture.next()).url };
  }

  async function tokenFor(callback: URL, verifier: string): Promise<string> {
    const code = callback.searchParams.get('code');
    expect(code, callback.href).to.be.a('string');
    const response = await exchangeCode(server.issuer, client, code!, verifier);
    expect(response.status, await response.clone().text()).to.equal(200);
    return ((await response.json()) as { access_token: string }).access_token;
  }

  it('403 names the missing scope; the second consent asks only for it, in the same workspace; the token has the union in one grant', async () => {
    const page = await browser.open();
    const first = await toConsent(page, 'profile');
    await page.getByLabel(/Second Co/).check();
    await page.getByRole('button', { name: 'Allow' }).click();
    const narrow = await tokenFor(await first.next(), first.verifier);
    expect(decodeJwt(narrow).scope).to.equal('profile');

    const refused = await api(server, '/rest/companies', { credential: narrow });
    expect(refused.status).to.equal(403);
    const challenge = refused.headers.get('www-authenticate')!;
    expect(challenge).to.include('error="insufficient_scope"').and.include('scope="api"')
      .and.include(`resource_metadata="${server.origin}/.well-known/oauth-protected-resource/rest"`);

    // The client asks for the union of what it has and what the challenge named.
    const union = [...new Set([...String(decodeJwt(narrow).scope).split(' '), 'api'])].join(' ');
    const second = await toConsent(page, union);
    const main = await page.locator('main').innerText();
    expect(main).to.match(/asks to be able to do more/i);
    const newItems = await page.locator('main ul').first().innerText();
    const alreadyAllowed = await page.locator('main ul.already').innerText();
    expect(newItems, 'only the new scope is asked for').to.match(/records and metadata/).and.not.match(/email/);
    expect(alreadyAllowed).to.match(/email/).and.not.match(/records/);
    expect(main, 'the workspace of the first consent, not a choice').to.include('Workspace: Second Co');
    expect(await page.getByRole('radio').count()).to.equal(0);
    await page.getByRole('button', { name: 'Allow' }).click();
    const wide = await tokenFor(await second.next(), second.verifier);

    const claims = decodeJwt(wide);
    expect(String(claims.scope).split(' ').sort()).to.deep.equal(['api', 'profile']);
    expect(claims.workspace_id).to.equal(user.workspaces[1]!.id);
    expect(claims.gid, 'one grant, grown').to.be.a('string').and.equal(decodeJwt(narrow).gid);
    expect((await api(server, '/rest/companies', { credential: wide })).status).to.equal(200);
  });

  it('asking to reach another API with what was already allowed lists it once, as what the application will be able to do there', async () => {
    client = await registerClient(server.issuer, { client_name: 'Reaching App' });
    const page = await browser.open();
    const first = await toConsent(page, 'api');
    await page.getByRole('button', { name: 'Allow' }).click();
    await tokenFor(await first.next(), first.verifier);

    const second = await toConsent(page, 'api', `${server.issuer}/mcp`);
    const main = await page.locator('main').innerText();
    expect(main).to.include('It will be able to:').and.include('It will reach the workspace data over MCP');
    expect(main.match(/records and metadata/g), 'the scope listed once').to.have.length(1);
    expect(await page.locator('main ul.already').count()).to.equal(0);
    await page.getByRole('button', { name: 'Allow' }).click();
    expect(decodeJwt(await tokenFor(await second.next(), second.verifier)).aud).to.equal(`${server.issuer}/mcp`);
  });
});
