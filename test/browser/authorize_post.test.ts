import { createServer, type Server } from 'node:http';
import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';
import type { Page } from 'playwright-core';

import { browserForSuite, captureRedirect } from '../support/browser.ts';
import { REDIRECT_URI, codeRequest, type CodeRequest, type RegisteredClient } from '../support/oauth.ts';
import { freePort, registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';

/**
 * OpenID Connect Core 3.1.2.1: the authorization endpoint accepts POST with a form body (the
 * conformance module oidcc-ensure-post-request-succeeds). The form is posted from a page on
 * another site (localhost vs 127.0.0.1), as a relying party's page would.
 */
describe('authorization request sent with POST', function () {
  this.timeout(30_000);

  let server: TestServer;
  let rpSite: Server;
  let rpOrigin: string;
  let user: SeededUser;
  const { open } = browserForSuite();

  before(async function () {
    server = await startServer({ env: { PKCE_REQUIRED: 'public' } });
    user = await seedUser(server, [{ workspace: 'Post Co' }]);
    const port = await freePort();
    rpOrigin = `http://localhost:${port}`;
    rpSite = createServer((request, response) => {
      // The relying party's page: an auto-submitting form whose fields are the query of this URL.
      const params = new URL(request.url ?? '/', rpOrigin).searchParams;
      const target = params.get('target')!;
      params.delete('target');
      const inputs = [...params].map(([name, value]) => `<input type="hidden" name="${escape(name)}" value="${escape(value)}">`).join('');
      response.setHeader('content-type', 'text/html');
      response.end(`<!doctype html><form id="f" method="post" action="${escape(target)}">${inputs}</form><script>document.getElementById('f').submit()</script>`);
    });
    await new Promise<void>((resolve) => rpSite.listen(port, '127.0.0.1', resolve));
  });

  after(async function () {
    rpSite?.close();
    await server?.stop();
  });

  const escape = (value: string) => value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

  /** Sends the browser to the relying party's page, which posts the request's parameters to the authorization endpoint. */
  async function postFromRelyingParty(page: Page, auth: CodeRequest): Promise<void> {
    const url = new URL(`${rpOrigin}/`);
    url.searchParams.set('target', `${server.issuer}/oauth/authorize`);
    for (const [name, value] of Object.entries(auth.params)) url.searchParams.set(name, value);
    await page.goto(url.href);
  }

  /** The conformance suite's client: confidential, client_secret_basic, scope openid, no PKCE; vetted, so the engine's refusals reach it. */
  async function conformanceClient(): Promise<RegisteredClient> {
    return registerVettedClient(server, { token_endpoint_auth_method: 'client_secret_basic' });
  }

  const openidRequest = (client: RegisteredClient, overrides: Record<string, string | undefined> = {}) =>
    codeRequest(server.issuer, client.client_id, { scope: 'openid', code_challenge: undefined, code_challenge_method: undefined, nonce: 'n-0S6_WzA2Mj', ...overrides });

  async function exchange(client: RegisteredClient, code: string): Promise<Record<string, unknown>> {
    const basic = `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret!)}`).toString('base64')}`;
    const response = await fetch(`${server.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic },
      body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI }),
    });
    expect(response.status, 'token endpoint status').to.equal(200);
    return response.json() as Promise<Record<string, unknown>>;
  }

  it('signs the user in, asks for consent and redirects back with a code that redeems, as the GET request does', async function () {
    const client = await conformanceClient();
    const page = await open();
    const capture = await captureRedirect(page, REDIRECT_URI);
    const auth = openidRequest(client);

    await postFromRelyingParty(page, auth);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Allow', exact: true }).click();

    const redirect = await capture.next();
    expect(redirect.url.searchParams.get('state')).to.equal(auth.state);
    const tokens = await exchange(client, redirect.url.searchParams.get('code')!);
    expect(tokens).to.have.property('id_token');
  });

  it('finds the session of a user already signed in: prompt=none posted from another site returns a code at once', async function () {
    const client = await conformanceClient();
    const page = await open();
    const capture = await captureRedirect(page, REDIRECT_URI);

    await postFromRelyingParty(page, openidRequest(client));
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Allow', exact: true }).click();
    await capture.next();

    const silent = openidRequest(client, { prompt: 'none' });
    await postFromRelyingParty(page, silent);
    const redirect = await capture.next();
    expect(redirect.url.searchParams.get('error'), 'the session cookie reached the endpoint').to.equal(null);
    expect(redirect.url.searchParams.get('state')).to.equal(silent.state);
    await exchange(client, redirect.url.searchParams.get('code')!);
  });

  describe('over plain HTTP', function () {
    let client: RegisteredClient;

    before(async function () {
      client = await conformanceClient();
    });

    const post = (body: string | Uint8Array<ArrayBuffer>, contentType = 'application/x-www-form-urlencoded') =>
      fetch(`${server.issuer}/oauth/authorize`, { method: 'POST', headers: { 'content-type': contentType }, body, redirect: 'manual' });

    /** The posted forms the store holds, unexpired, as the SQLite file has them. */
    function parkedForms(): Array<{ id: string; payload: string }> {
      const db = new DatabaseSync(server.store.slice('sqlite:'.length), { readOnly: true });
      try {
        return db.prepare("SELECT id, payload FROM oidc_models WHERE model = 'PostedForm' AND expires_at > unixepoch()").all() as Array<{ id: string; payload: string }>;
      } finally {
        db.close();
      }
    }

    it('answers 303 to a GET naming only a handle, which the engine serves with the parameters intact (repeated ones too, which it then refuses)', async function () {
      const auth = openidRequest(client, { state: 'a b&c=d/é', scope: 'openid email' });
      const response = await post(new URLSearchParams(auth.params).toString());
      expect(response.status).to.equal(303);
      const location = new URL(response.headers.get('location')!);
      expect(location.origin + location.pathname).to.equal(`${server.issuer}/oauth/authorize`);
      expect([...location.searchParams.keys()], 'nothing of the form in the URL').to.deep.equal(['posted_form']);
      const followed = await fetch(location, { redirect: 'manual' });
      const answer = new URL(followed.headers.get('location')!).searchParams;
      expect(answer.get('error'), 'the engine read the form').to.equal('invalid_scope');
      expect(answer.get('state')).to.equal('a b&c=d/é');

      const repeated = await post(`${new URLSearchParams(openidRequest(client).params)}&scope=api`);
      const refused = await fetch(repeated.headers.get('location')!, { redirect: 'manual' });
      const refusal = new URL(refused.headers.get('location')!).searchParams;
      expect(refusal.get('error')).to.equal('invalid_request');
      expect(refusal.get('error_description')).to.include('scope');
    });

    it('serves a handle once, and not after a minute: then the error page says to start again from the application', async function () {
      const form = new URLSearchParams(openidRequest(client, { state: 'parked-state' }).params).toString();
      const parked = (await post(form)).headers.get('location')!;
      const [first, second] = await Promise.all([fetch(parked, { redirect: 'manual' }), fetch(parked, { redirect: 'manual' })]);
      expect([first.status, second.status].sort(), 'one of two at once').to.deep.equal([303, 400]);
      const again = await fetch(parked, { redirect: 'manual' });
      expect(again.status).to.equal(400);
      expect(again.headers.get('location')).to.equal(null);
      expect(again.headers.get('content-type')).to.match(/^text\/html/);
      expect(await again.text()).to.include('has been used already: go back to the application and start again');

      const late = (await post(form)).headers.get('location')!;
      const db = new DatabaseSync(server.store.slice('sqlite:'.length));
      db.prepare("UPDATE oidc_models SET expires_at = ? WHERE model = 'PostedForm'").run(Math.floor(Date.now() / 1000) - 1);
      db.close();
      const expired = await fetch(late, { redirect: 'manual' });
      expect(expired.status).to.equal(400);
      expect(await expired.text()).to.include('was sent more than 60 seconds ago');
    });

    it('takes a handle only by GET and at the endpoint the form was posted to; a GET that fails gives the form back for the reload', async function () {
      const parked = new URL((await post(new URLSearchParams(openidRequest(client).params).toString())).headers.get('location')!);
      const elsewhere = await fetch(`${server.issuer}/oauth/logout${parked.search}`, { redirect: 'manual' });
      expect(elsewhere.status, 'an authorization request\'s handle at the logout endpoint').to.equal(400);
      expect(await elsewhere.text()).to.include('has been used already');
      const head = await fetch(parked, { method: 'HEAD', redirect: 'manual' });
      expect(head.status, 'a HEAD is no browser following the 303').to.be.below(500);

      // The store refuses to keep the interaction the engine starts for the request.
      const db = new DatabaseSync(server.store.slice('sqlite:'.length));
      db.exec("CREATE TRIGGER refuse_interactions BEFORE INSERT ON oidc_models WHEN NEW.model = 'Interaction' BEGIN SELECT RAISE(ABORT, 'no room'); END");
      try {
        expect((await fetch(parked, { redirect: 'manual' })).status).to.be.at.least(500);
      } finally {
        db.exec('DROP TRIGGER refuse_interactions');
        db.close();
      }
      const reloaded = await fetch(parked, { redirect: 'manual' });
      expect(reloaded.status).to.equal(303);
      expect(reloaded.headers.get('location')).to.match(/\/interaction\/[\w-]+$/);
      expect((await fetch(parked, { redirect: 'manual' })).status, 'once served, used').to.equal(400);
    });

    it('keeps the parked form sealed, under no handle a copy of the store shows, and only until the GET takes it', async function () {
      const auth = openidRequest(client, { state: 'state-nobody-reads-at-rest' });
      const location = new URL((await post(new URLSearchParams(auth.params).toString())).headers.get('location')!);
      const handle = location.searchParams.get('posted_form')!;
      const rows = parkedForms();
      expect(rows).to.have.length(1);
      expect(rows[0]!.id).to.not.include(handle);
      expect(rows[0]!.payload).to.not.include('state-nobody-reads-at-rest').and.not.include(client.client_id).and.not.include(handle);

      await fetch(location, { redirect: 'manual' });
      expect(parkedForms(), 'taken').to.deep.equal([]);
    });

    it('leads to the same error answer as the GET request for a request the engine refuses', async function () {
      const auth = openidRequest(client, { scope: 'openid email' });
      const posted = await post(new URLSearchParams(auth.params).toString());
      const followed = await fetch(posted.headers.get('location')!, { redirect: 'manual' });
      const direct = await fetch(auth.url, { redirect: 'manual' });
      expect(followed.status).to.equal(direct.status);
      const error = (response: Response) => new URL(response.headers.get('location')!).searchParams.get('error');
      expect(error(followed)).to.equal('invalid_scope');
      expect(error(direct)).to.equal('invalid_scope');
    });

    it('refuses a body that is not a form, and an oversized one, with the error page (no redirect, no 5xx)', async function () {
      const json = await post(JSON.stringify({ client_id: client.client_id }), 'application/json');
      expect(json.status).to.equal(400);
      expect(json.headers.get('content-type')).to.match(/^text\/html/);
      expect(await json.text()).to.include('must be a form');

      const huge = await post(`client_id=${client.client_id}&state=${'x'.repeat(10_000)}`);
      expect(huge.status).to.equal(413);
      expect(huge.headers.get('location')).to.equal(null);
      expect(await huge.text()).to.include('larger than 8 KiB');

      // Under 8 KiB as sent, but raw bytes (not percent-encoded by the sender) triple once re-encoded: more than the same request by GET could carry.
      const raw = new Uint8Array(Buffer.concat([Buffer.from(`client_id=${client.client_id}&state=`), Buffer.alloc(7 * 1024, 0xe9)]));
      const tooLongAsLink = await post(raw);
      expect(tooLongAsLink.status).to.equal(413);
      expect(tooLongAsLink.headers.get('location')).to.equal(null);
      expect(tooLongAsLink.headers.get('content-type')).to.match(/^text\/html/);
      expect(await tooLongAsLink.text()).to.include('too large to be carried in a link');
    });

    it('still answers GET requests itself (the engine), and other methods with 405 or 404, never 5xx', async function () {
      const get = await fetch(openidRequest(client).url, { redirect: 'manual' });
      expect(get.status).to.equal(303);
      expect(get.headers.get('location')).to.include('/interaction/');
      const put = await fetch(`${server.issuer}/oauth/authorize`, { method: 'PUT', redirect: 'manual' });
      expect(put.status).to.be.oneOf([404, 405]);
    });
  });
});
