import { expect } from 'chai';

import { authorizationUrl, pkcePair, postCredentials, postForm, REDIRECT_URI, register, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { startServer, type TestServer } from '../support/server.ts';

/**
 * The engine's router also takes a path in another case or with a trailing slash, which the
 * host's steps around each endpoint (rate limits, held error redirects, the token endpoint's
 * checks) would not see. Every such variant is answered 404, as an unknown path is; the exact
 * paths, ids in any case included, are answered as before.
 */
describe('engine endpoints answer at their exact paths only', function () {
  this.timeout(60_000);

  let server: TestServer;
  /** A self-registered client: unvetted, so its errors are held on a page at the exact path. */
  let client: RegisteredClient;

  before(async () => {
    server = await startServer();
    client = await registerClient(server.issuer, { redirect_uris: [REDIRECT_URI] });
  });

  after(async () => {
    await server?.stop();
  });

  async function expectNotFound(response: Response, what: string): Promise<void> {
    expect([response.status, response.headers.get('location')], `${what}: ${await response.text()}`).to.deep.equal([404, null]);
  }

  it('the token endpoint: a wrong secret is refused at the exact path only; nowhere else is the engine reached', async () => {
    const form = postCredentials({ client_id: client.client_id, client_secret: 'wrong' });
    const exact = await postForm(`${server.issuer}/oauth/token`, { grant_type: 'client_credentials', ...form });
    expect(exact.status).to.equal(401);
    for (const path of ['/OAuth/Token', '/oauth/token/', '/OAUTH/TOKEN/', '/oauth/Token']) {
      await expectNotFound(await postForm(`${server.issuer}${path}`, { grant_type: 'client_credentials', ...form }), path);
    }
  });

  it("the authorization endpoint: an unvetted client's error is held on a page at the exact path, and is never redirected from a variant", async () => {
    const params = {
      client_id: client.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'no-such-scope', state: 's',
      code_challenge: pkcePair().challenge, code_challenge_method: 'S256',
    };
    const exact = await fetch(authorizationUrl(server.issuer, params), { redirect: 'manual' });
    expect([exact.status, exact.headers.get('location')]).to.deep.equal([400, null]);
    for (const path of ['/OAuth/Authorize', '/oauth/authorize/']) {
      const url = new URL(authorizationUrl(server.issuer, params));
      url.pathname = path;
      await expectNotFound(await fetch(url, { redirect: 'manual' }), path);
    }
  });

  it('sign-out, registration and discovery: variants are 404, and a client id in any case still reaches its registration', async () => {
    const logout = new URL(`${server.issuer}/oauth/logout/`);
    logout.searchParams.set('client_id', client.client_id);
    logout.searchParams.set('post_logout_redirect_uri', 'https://elsewhere.example/bye');
    await expectNotFound(await fetch(logout, { redirect: 'manual' }), logout.pathname);

    const body = JSON.stringify({ redirect_uris: [REDIRECT_URI], application_type: 'web' });
    await expectNotFound(await fetch(`${server.issuer}/OAuth/Register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }), '/OAuth/Register');
    expect((await register(server.issuer)).status, 'the exact registration path').to.equal(201);

    await expectNotFound(await fetch(`${server.issuer}/.well-known/OpenID-Configuration`), 'discovery in another case');
    expect((await fetch(`${server.issuer}/.well-known/openid-configuration`)).status).to.equal(200);

    expect(client.client_id, 'a client id with letters of both cases').to.match(/[a-z]/).and.to.match(/[A-Z]/);
    const read = await fetch(client.registration_client_uri, { headers: { authorization: `Bearer ${client.registration_access_token}` } });
    expect(read.status).to.equal(200);
  });

  it('a path nothing serves, an engine path\'s variant included: the error page for a browser, JSON for any other client; never a bare "Not Found"', async () => {
    for (const path of ['/nope/xyz', '/favicon.ico', '/OAuth/Token', '/oauth/nope']) {
      const page = await fetch(`${server.issuer}${path}`, { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
      expect(page.status, path).to.equal(404);
      const html = await page.text();
      expect(html, path).to.match(/<html lang="en"/).and.match(/<title>[^<]+<\/title>/).and.match(/<main>[\s\S]*<h1>Not found<\/h1>/);
      const api = await fetch(`${server.issuer}${path}`);
      expect(api.status, path).to.equal(404);
      expect(await api.json(), path).to.include({ error: 'not_found' });
    }
  });

  it('the engine\'s endpoints answer a method they do not take with 405 and Allow (RFC 9126 section 2.3 for PAR), and a browser\'s preflight as before', async () => {
    for (const path of ['/oauth/token', '/oauth/par', '/oauth/introspect', '/oauth/revoke', '/oauth/register']) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const response = await fetch(`${server.issuer}${path}`, { method });
        const body = await response.json() as { error: string };
        expect([response.status, response.headers.get('allow'), body.error], `${method} ${path}`).to.deep.equal([405, 'POST', 'invalid_request']);
      }
      const preflight = await fetch(`${server.issuer}${path}`, {
        method: 'OPTIONS', headers: { origin: 'https://spa.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, dpop' },
      });
      expect(preflight.status, `OPTIONS ${path}`).to.equal(204);
      expect(preflight.headers.get('access-control-allow-origin'), `OPTIONS ${path}`).to.be.oneOf(['https://spa.example', '*']);
    }
    // The endpoints read with GET (and userinfo, with POST too): the same, naming theirs.
    for (const [path, allow] of [['/oauth/jwks', 'GET, HEAD'], ['/oauth/userinfo', 'GET, POST, HEAD'], [new URL(client.registration_client_uri).pathname, 'GET, PUT, DELETE, HEAD']] as const) {
      const response = await fetch(`${server.issuer}${path}`, { method: path === '/oauth/userinfo' ? 'PUT' : 'POST' });
      expect([response.status, response.headers.get('allow')], path).to.deep.equal([405, allow]);
    }
    // The browser's endpoints, which take a form by POST too; and a plain OPTIONS is told their methods.
    for (const path of ['/oauth/authorize', '/oauth/logout']) {
      for (const method of ['PUT', 'DELETE']) {
        const response = await fetch(`${server.issuer}${path}`, { method });
        expect([response.status, response.headers.get('allow')], `${method} ${path}`).to.deep.equal([405, 'GET, POST, HEAD']);
      }
      const options = await fetch(`${server.issuer}${path}`, { method: 'OPTIONS' });
      expect([options.status, options.headers.get('allow')], `OPTIONS ${path}`).to.deep.equal([204, 'GET, POST, HEAD, OPTIONS']);
    }
    expect((await fetch(`${server.issuer}/oauth/jwks`)).status, 'GET still served').to.equal(200);
  });

  it('the discovery documents answer a method they do not take with 405 and Allow, naming the path asked for, and OPTIONS with the methods', async () => {
    for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
      for (const method of ['POST', 'PUT', 'DELETE']) {
        const response = await fetch(`${server.issuer}${path}`, { method });
        const body = await response.json() as { error: string; error_description: string };
        expect([response.status, response.headers.get('allow'), body.error], `${method} ${path}`).to.deep.equal([405, 'GET, HEAD', 'invalid_request']);
        expect(body.error_description, `${method} ${path}`).to.contain(path);
      }
      const options = await fetch(`${server.issuer}${path}`, { method: 'OPTIONS' });
      expect([options.status, options.headers.get('allow')], `OPTIONS ${path}`).to.deep.equal([204, 'GET, HEAD, OPTIONS']);
      const preflight = await fetch(`${server.issuer}${path}`, { method: 'OPTIONS', headers: { origin: 'https://spa.example', 'access-control-request-method': 'GET' } });
      expect(preflight.status, `preflight ${path}`).to.equal(204);
      expect(preflight.headers.get('access-control-allow-origin'), `preflight ${path}`).to.be.oneOf(['https://spa.example', '*']);
      expect((await fetch(`${server.issuer}${path}`)).status, `GET ${path}`).to.equal(200);
    }
  });

  it('the engine\'s endpoints answer OPTIONS without an Origin (not a preflight) with the methods they take (RFC 9110 9.3.7)', async () => {
    for (const [path, allow] of [
      ['/oauth/token', 'POST, OPTIONS'], ['/oauth/par', 'POST, OPTIONS'], ['/oauth/introspect', 'POST, OPTIONS'], ['/oauth/revoke', 'POST, OPTIONS'],
      ['/oauth/register', 'POST, OPTIONS'], ['/oauth/jwks', 'GET, HEAD, OPTIONS'], ['/oauth/userinfo', 'GET, POST, HEAD, OPTIONS'],
      [new URL(client.registration_client_uri).pathname, 'GET, PUT, DELETE, HEAD, OPTIONS'],
    ] as const) {
      const response = await fetch(`${server.issuer}${path}`, { method: 'OPTIONS' });
      expect([response.status, response.headers.get('allow'), await response.text()], path).to.deep.equal([204, allow, '']);
    }
  });
});
