import { connect } from 'node:net';
import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';

import { openStore } from '../../adapters/index.ts';
import { codeRequest, management, REDIRECT_URI, register, registerClient, type RegisteredClient, tokenRequest } from '../support/oauth.ts';
import { initialAccessToken, registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

/**
 * Dynamic client registration (RFC 7591) and its management protocol (RFC 7592): what a client
 * developer sees when registering, reading, updating and deleting a client, and every refusal.
 */

type Json = Record<string, unknown>;

async function jsonError(response: Response): Promise<{ error: string; error_description: string }> {
  expect(response.headers.get('content-type')).to.match(/^application\/json/);
  const body = await response.json() as Json;
  expect(body.error).to.be.a('string').that.is.not.empty;
  return body as { error: string; error_description: string };
}

async function expectRefusal(response: Response, status: number, error: string, description?: RegExp): Promise<void> {
  expect(response.status, `expected ${status} ${error}`).to.equal(status);
  const body = await jsonError(response);
  expect(body.error).to.equal(error);
  expect(body.error_description).to.be.a('string').that.is.not.empty;
  if (description) expect(body.error_description).to.match(description);
}

function rawRegister(issuer: string, body: string, contentType: string): Promise<Response> {
  return fetch(`${issuer}/oauth/register`, { method: 'POST', headers: { 'content-type': contentType }, body });
}

/** A token request that authenticates the client and then fails on the grant: tells client auth apart. */
function bogusRefresh(issuer: string, clientId: string, secret: string): Promise<Response> {
  return tokenRequest(issuer, { grant_type: 'refresh_token', refresh_token: 'not-a-real-refresh-token', client_id: clientId, client_secret: secret });
}

describe('client registration', () => {
  let server: TestServer;
  let iatServer: TestServer;
  let admin: SeededUser;

  before(async () => {
    [server, iatServer] = await Promise.all([
      // The file registers more clients from one address than the default limit lets in an hour
      // (test/http/rate_limits.test.ts tests that limit).
      startServer({ env: { RATE_LIMIT_REGISTRATION: '1000/1h' } }),
      startServer({ env: { REGISTRATION: 'initial_access_token' } }),
    ]);
    admin = await seedUser(server, [{ workspace: 'Acme', role: 'admin' }]);
  });

  after(async () => {
    await Promise.all([server?.stop(), iatServer?.stop()]);
  });

  describe('RFC 7591 registration', () => {
    it("answers the specification's body with 201 and everything the client needs", async () => {
      const response = await register(server.issuer);
      expect(response.status).to.equal(201);
      expect(response.headers.get('cache-control')).to.equal('no-store');
      expect(response.headers.get('pragma'), 'a secret, for HTTP/1.0 caches too (RFC 7591 3.2.1)').to.equal('no-cache');
      expect(response.headers.get('content-type')).to.match(/^application\/json/);
      const body = await response.json() as RegisteredClient;
      expect(body.client_id).to.be.a('string').with.length.greaterThan(15);
      expect(body.client_secret).to.be.a('string').with.length.greaterThan(31);
      expect(body.client_name).to.equal('Test App');
      expect(body.redirect_uris).to.deep.equal([REDIRECT_URI]);
      expect(body.grant_types).to.include.members(['authorization_code', 'refresh_token']);
      expect(body.token_endpoint_auth_method).to.equal('client_secret_post');
      expect(body.registration_client_uri).to.equal(`${server.issuer}/oauth/register/${body.client_id}`);
      expect(body.registration_access_token).to.be.a('string').that.is.not.empty;
      expect(body).not.to.have.property('workspace_id');
    });

    it('lets a page on another origin register (CORS), without allowing credentials', async () => {
      const preflight = await fetch(`${server.issuer}/oauth/register`, {
        method: 'OPTIONS',
        headers: { origin: 'https://mcp-host.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, authorization' },
      });
      expect(preflight.status).to.equal(204);
      expect(preflight.headers.get('access-control-allow-origin')).to.equal('*');
      expect(preflight.headers.get('access-control-allow-methods')).to.include('POST');
      expect(preflight.headers.get('access-control-allow-headers')!.toLowerCase()).to.include('content-type').and.include('authorization');
      expect(preflight.headers.get('access-control-allow-credentials')).to.equal(null);
      const registered = await fetch(`${server.issuer}/oauth/register`, {
        method: 'POST',
        headers: { origin: 'https://mcp-host.example', 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'Browser host', redirect_uris: ['https://mcp-host.example/callback'], token_endpoint_auth_method: 'none' }),
      });
      expect(registered.status).to.equal(201);
      expect(registered.headers.get('access-control-allow-origin')).to.equal('*');
    });

    it('lets that page read, update and delete its registration (RFC 7592) across origins too, a refusal included', async () => {
      const origin = 'https://mcp-host.example';
      const registered = await (await fetch(`${server.issuer}/oauth/register`, {
        method: 'POST',
        headers: { origin, 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'Browser host', redirect_uris: [`${origin}/callback`], token_endpoint_auth_method: 'none' }),
      })).json() as { client_id: string; registration_client_uri: string; registration_access_token: string };
      const uri = registered.registration_client_uri;
      const preflight = await fetch(uri, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'content-type, authorization' },
      });
      expect(preflight.status).to.equal(204);
      expect(preflight.headers.get('access-control-allow-origin')).to.equal('*');
      expect(preflight.headers.get('access-control-allow-methods')!.split(', ')).to.include.members(['GET', 'PUT', 'DELETE']);
      expect(preflight.headers.get('access-control-allow-headers')!.toLowerCase()).to.include('content-type').and.include('authorization');
      expect(preflight.headers.get('access-control-allow-credentials')).to.equal(null);

      const read = await fetch(uri, { headers: { origin, authorization: `Bearer ${registered.registration_access_token}` } });
      expect(read.status).to.equal(200);
      expect(read.headers.get('access-control-allow-origin')).to.equal('*');
      const updated = await fetch(uri, {
        method: 'PUT',
        headers: { origin, 'content-type': 'application/json', authorization: `Bearer ${registered.registration_access_token}` },
        body: JSON.stringify({ client_id: registered.client_id, client_name: 'Browser host, renamed', redirect_uris: [`${origin}/callback`], token_endpoint_auth_method: 'none' }),
      });
      expect(updated.status).to.equal(200);
      expect(updated.headers.get('access-control-allow-origin')).to.equal('*');
      const { registration_access_token: rotated } = await updated.json() as { registration_access_token: string };
      // A refusal is readable too, and says why (RFC 6750: the challenge is exposed).
      const refused = await fetch(uri, { headers: { origin, authorization: 'Bearer not-the-token' } });
      expect(refused.status).to.equal(401);
      expect(refused.headers.get('access-control-allow-origin')).to.equal('*');
      expect(refused.headers.get('access-control-expose-headers')).to.include('WWW-Authenticate');
      const deleted = await fetch(uri, { method: 'DELETE', headers: { origin, authorization: `Bearer ${rotated}` } });
      expect(deleted.status).to.equal(204);
      expect(deleted.headers.get('access-control-allow-origin')).to.equal('*');
    });

    it('stores no client when its registration access token cannot be stored', async () => {
      const db = new DatabaseSync(server.store.slice('sqlite:'.length));
      const clients = () => (db.prepare("SELECT count(*) AS n FROM oidc_models WHERE model = 'Client'").get() as { n: number }).n;
      const before = clients();
      db.exec("CREATE TRIGGER refuse_registration_tokens BEFORE INSERT ON oidc_models WHEN NEW.model = 'RegistrationAccessToken' BEGIN SELECT RAISE(ABORT, 'no room'); END");
      try {
        const response = await register(server.issuer, { redirect_uris: [REDIRECT_URI] });
        expect(response.status).to.be.at.least(500);
        expect(clients(), 'a client nobody can manage or authenticate as').to.equal(before);
      } finally {
        db.exec('DROP TRIGGER refuse_registration_tokens');
        db.close();
      }
    });

    it('gives every registration its own client_id and client_secret', async () => {
      const [a, b] = await Promise.all([registerClient(server.issuer), registerClient(server.issuer)]);
      expect(a.client_id).not.to.equal(b.client_id);
      expect(a.client_secret).not.to.equal(b.client_secret);
    });

    it('gives a public client (token_endpoint_auth_method none) no client_secret', async () => {
      const body = await registerClient(server.issuer, { token_endpoint_auth_method: 'none' });
      expect(body.token_endpoint_auth_method).to.equal('none');
      expect(body).not.to.have.property('client_secret');
      expect(body.client_id).to.be.a('string').that.is.not.empty;
    });

    it('accepts client_secret_basic, and the secret then works in the Authorization header', async () => {
      const body = await registerClient(server.issuer, { token_endpoint_auth_method: 'client_secret_basic' });
      expect(body.token_endpoint_auth_method).to.equal('client_secret_basic');
      const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
      const ok = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: 'not-a-real-refresh-token' }, { authorization: basic(body.client_id, body.client_secret!) });
      await expectRefusal(ok, 400, 'invalid_grant');
      const wrong = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: 'not-a-real-refresh-token' }, { authorization: basic(body.client_id, 'wrong-secret') });
      await expectRefusal(wrong, 401, 'invalid_client');
    });

    it('stores the client secret only as a hash, and the plaintext still authenticates the client', async () => {
      const registered = await registerClient(server.issuer);
      const secret = registered.client_secret!;
      const store = openStore(server.store);
      try {
        const stored = await store.model('Client').find(registered.client_id);
        expect(stored, 'client record in SQLite').to.be.an('object');
        expect(stored!.client_id).to.equal(registered.client_id);
        expect(stored!.client_secret).to.be.a('string').that.is.not.empty;
        expect(stored!.client_secret).not.to.equal(secret);
        expect(stored!.client_secret as string).not.to.include(secret);
        expect(JSON.stringify(stored)).not.to.include(secret);
      } finally {
        await store.close();
      }

      await expectRefusal(await bogusRefresh(server.issuer, registered.client_id, secret), 400, 'invalid_grant');
      const wrong = await bogusRefresh(server.issuer, registered.client_id, `${secret}x`);
      await expectRefusal(wrong, 401, 'invalid_client');
    });

    it('registers a client with a stock library: openid-client dynamicClientRegistration', async () => {
      const config = await client.dynamicClientRegistration(new URL(server.issuer), {
        client_name: 'openid-client app',
        redirect_uris: [REDIRECT_URI],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_post',
      }, undefined, { execute: [client.allowInsecureRequests] });
      const metadata = config.clientMetadata();
      expect(metadata.client_id).to.be.a('string').that.is.not.empty;
      expect(metadata.client_secret).to.be.a('string').that.is.not.empty;
      expect(metadata.redirect_uris).to.deep.equal([REDIRECT_URI]);
      expect(config.serverMetadata().issuer).to.equal(server.issuer);
      const check = await bogusRefresh(server.issuer, metadata.client_id, metadata.client_secret as string);
      await expectRefusal(check, 400, 'invalid_grant');
    });

    it('registers a public client with a stock library: oauth4webapi dynamicClientRegistrationRequest', async () => {
      const issuer = new URL(server.issuer);
      const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true }));
      const response = await oauth.dynamicClientRegistrationRequest(as, {
        client_name: 'oauth4webapi app',
        redirect_uris: [REDIRECT_URI],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'none',
      }, { [oauth.allowInsecureRequests]: true });
      const registered = await oauth.processDynamicClientRegistrationResponse(response);
      expect(registered.client_id).to.be.a('string').that.is.not.empty;
      expect(registered).not.to.have.property('client_secret');
      expect(registered.token_endpoint_auth_method).to.equal('none');
    });
  });

  describe('RFC 7592 management', () => {
    let registered: RegisteredClient;

    before(async () => {
      registered = await registerClient(server.issuer, { client_name: 'Managed App' });
    });

    it('reads the client metadata back with the registration access token, without the secret', async () => {
      const response = await management(registered.registration_client_uri, registered.registration_access_token);
      expect(response.status).to.equal(200);
      expect(response.headers.get('cache-control')).to.equal('no-store');
      const body = await response.json() as Json;
      expect(body.client_id).to.equal(registered.client_id);
      expect(body.client_name).to.equal('Managed App');
      expect(body.redirect_uris).to.deep.equal([REDIRECT_URI]);
      expect(body.grant_types).to.include.members(['authorization_code', 'refresh_token']);
      expect(body).not.to.have.property('client_secret');
      expect(JSON.stringify(body)).not.to.include(registered.client_secret!);
    });

    it('refuses to read without a registration access token (401, WWW-Authenticate: Bearer)', async () => {
      const response = await management(registered.registration_client_uri, undefined);
      await expectRefusal(response, 401, 'invalid_token');
      expect(response.headers.get('www-authenticate')).to.match(/^Bearer\b/);
    });

    it('says when the secret expires in RFC 7592 read and update responses (RFC 7591 3.2.1), never the secret itself', async () => {
      const own = await registerClient(server.issuer, { client_name: 'Expiry Shown' });
      const read = await (await management(own.registration_client_uri, own.registration_access_token)).json() as Json;
      expect(read).not.to.have.property('client_secret');
      expect(read.client_secret_expires_at, 'the secret never expires').to.equal(0);
      const updated = await management(own.registration_client_uri, own.registration_access_token, 'PUT', {
        client_id: own.client_id, client_name: 'Expiry Shown, renamed', redirect_uris: [REDIRECT_URI],
      });
      const body = await updated.json() as Json;
      expect(body).not.to.have.property('client_secret');
      expect(body.client_secret_expires_at).to.equal(0);
      const publicClient = await registerClient(server.issuer, { token_endpoint_auth_method: 'none' });
      const publicRead = await (await management(publicClient.registration_client_uri, publicClient.registration_access_token)).json() as Json;
      expect(publicRead, 'a client without a secret has no expiry to show').not.to.have.property('client_secret_expires_at');
    });

    it('refuses to read with a wrong registration access token, or with another client\'s token', async () => {
      await expectRefusal(await management(registered.registration_client_uri, 'not-a-registration-token'), 401, 'invalid_token');
      const other = await registerClient(server.issuer);
      const response = await management(registered.registration_client_uri, other.registration_access_token);
      expect(response.status).to.be.oneOf([401, 403]);
      expect((await jsonError(response)).error).to.be.oneOf(['invalid_token', 'invalid_client']);
    });

    it('updates the client with PUT when the client includes its client_secret, as RFC 7592 allows', async () => {
      const own = await registerClient(server.issuer, { client_name: 'Before Update' });
      const response = await management(own.registration_client_uri, own.registration_access_token, 'PUT', {
        client_id: own.client_id,
        client_secret: own.client_secret,
        client_name: 'After Update',
        redirect_uris: [REDIRECT_URI],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_post',
      });
      expect(response.status, await response.clone().text()).to.equal(200);
      const body = await response.json() as Json;
      expect(body.client_name).to.equal('After Update');
      expect(body).not.to.have.property('client_secret');
      await expectRefusal(await bogusRefresh(server.issuer, own.client_id, own.client_secret!), 400, 'invalid_grant');
    });

    it("checks an update's client_secret however the body is sent: the secret is accepted chunked; a wrong one, or the stored hash, is refused and changes nothing", async () => {
      const own = await registerClient(server.issuer, { client_name: 'Before Update' });
      const store = openStore(server.store);
      const storedHash = await store.model('Client').find(own.client_id).finally(() => store.close());
      const update = (secret: unknown) => JSON.stringify({
        client_id: own.client_id, client_secret: secret, client_name: 'After Update', redirect_uris: [REDIRECT_URI],
        grant_types: ['authorization_code'], token_endpoint_auth_method: 'client_secret_post',
      });
      // Without a Content-Length: a stream body is sent chunked.
      const put = (body: string, token: string) => fetch(own.registration_client_uri, {
        method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, duplex: 'half',
        body: new Blob([body]).stream(),
      } as RequestInit);

      for (const refused of [`${own.client_secret}x`, storedHash!.client_secret, 42]) {
        await expectRefusal(await put(update(refused), own.registration_access_token), 400, 'invalid_request', /client_secret does not match/);
      }
      const read = await management(own.registration_client_uri, own.registration_access_token);
      expect((await read.json() as Json).client_name, 'nothing changed').to.equal('Before Update');
      // Without the registration access token, the secret is not checked: a guess learns nothing.
      for (const guess of [own.client_secret, `${own.client_secret}x`]) {
        await expectRefusal(await put(update(guess), 'not-the-registration-access-token'), 401, 'invalid_token');
      }

      const accepted = await put(update(own.client_secret), own.registration_access_token);
      expect(accepted.status, await accepted.clone().text()).to.equal(200);
      expect((await accepted.json() as Json).client_name).to.equal('After Update');
    });

    it('an update with and without client_secret, with a length, chunked or cut short, leaves only JSON lines in the log: the engine reads the body from the request', async () => {
      const own = await registerClient(server.issuer, { client_name: 'Logged Update' });
      const since = server.logs().length;
      const metadata = (extra: Json) => JSON.stringify({
        client_id: own.client_id, client_name: 'Logged Update', redirect_uris: [REDIRECT_URI], grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_post', ...extra,
      });
      // An update may rotate the registration access token (RFC 7592 section 2.2): the latest is used.
      let token = own.registration_access_token;
      for (const body of [metadata({}), metadata({ client_secret: own.client_secret }), metadata({ client_secret: 'not-it' })]) {
        for (const sent of [body, new Blob([body]).stream()]) {
          const response = await fetch(own.registration_client_uri, {
            method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, duplex: 'half', body: sent,
          } as RequestInit);
          const answer = await response.json() as Json;
          expect(response.status, JSON.stringify(answer)).to.equal(body.includes('not-it') ? 400 : 200);
          if (typeof answer.registration_access_token === 'string') token = answer.registration_access_token;
        }
      }
      // Its charset is the one it declares, the client_secret checked in it as in UTF-8.
      const utf16 = await fetch(own.registration_client_uri, {
        method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json; charset=utf-16le' },
        body: Buffer.from(metadata({ client_secret: own.client_secret, client_name: 'Logged Update ✓' }), 'utf16le'),
      });
      const answer = await utf16.json() as Json;
      expect(utf16.status, JSON.stringify(answer)).to.equal(200);
      expect(answer.client_name).to.equal('Logged Update ✓');
      // A client that goes away before the body it announced ends, here and at the token endpoint:
      // logged as 499, the answer that never reached it.
      const { hostname, port } = new URL(server.origin);
      for (const [path, type, partial] of [[new URL(own.registration_client_uri).pathname, 'application/json', '{"client_name":'], ['/oauth/token', 'application/x-www-form-urlencoded', 'grant_type=client_credentials']]) {
        await new Promise<void>((resolve) => {
          const socket = connect(Number(port), hostname, () => {
            socket.write(`${path === '/oauth/token' ? 'POST' : 'PUT'} ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${token}\r\nContent-Type: ${type}\r\nContent-Length: 100\r\n\r\n${partial}`);
            setTimeout(() => socket.destroy(), 300);
          });
          socket.on('close', () => resolve());
        });
      }
      await eventually('both requests cut short in the log', () => server.logs().slice(since).includes('"path":"/oauth/token","status":499') || undefined, 5_000);
      const lines = server.logs().slice(since).split('\n').filter((line) => line.trim() !== '');
      for (const line of lines) expect(() => JSON.parse(line) as unknown, line).to.not.throw();
      const cutShort = lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.message === 'request' && line.path === '/oauth/token' && line.status === 499);
      expect(cutShort, 'the client\'s address, read before it went away').to.include({ ip: hostname });
    });

    it('updates the client with PUT (without client_secret): the secret keeps working and cannot be read back', async () => {
      const own = await registerClient(server.issuer, { client_name: 'Before Update' });
      const response = await management(own.registration_client_uri, own.registration_access_token, 'PUT', {
        client_id: own.client_id,
        client_name: 'After Update',
        redirect_uris: [REDIRECT_URI],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_post',
      });
      expect(response.status).to.equal(200);
      expect(response.headers.get('cache-control')).to.equal('no-store');
      const body = await response.json() as Json;
      expect(body.client_name).to.equal('After Update');
      expect(body).not.to.have.property('client_secret');
      expect(body.grant_types).to.include.members(['authorization_code', 'refresh_token']);
      await expectRefusal(await bogusRefresh(server.issuer, own.client_id, own.client_secret!), 400, 'invalid_grant');
    });

    it('does not let an update bind the client to a workspace or add client_credentials', async () => {
      const own = await registerClient(server.issuer);
      const metadata = { client_id: own.client_id, redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'client_secret_post' };
      const withGrant = await management(own.registration_client_uri, own.registration_access_token, 'PUT', {
        ...metadata, grant_types: ['authorization_code', 'client_credentials'], workspace_id: admin.workspaces[0]!.id,
      });
      await expectRefusal(withGrant, 400, 'invalid_client_metadata', /initial access token/i);

      const withWorkspace = await management(own.registration_client_uri, own.registration_access_token, 'PUT', {
        ...metadata, grant_types: ['authorization_code'], workspace_id: admin.workspaces[0]!.id,
      });
      expect(withWorkspace.status).to.equal(200);
      expect(await withWorkspace.json() as Json).not.to.have.property('workspace_id');
    });

    it('deletes the client with DELETE; afterwards it can neither be read nor authenticate', async () => {
      const own = await registerClient(server.issuer);
      await expectRefusal(await bogusRefresh(server.issuer, own.client_id, own.client_secret!), 400, 'invalid_grant');

      const deleted = await management(own.registration_client_uri, own.registration_access_token, 'DELETE');
      expect(deleted.status).to.equal(204);

      await expectRefusal(await management(own.registration_client_uri, own.registration_access_token), 401, 'invalid_token');
      await expectRefusal(await bogusRefresh(server.issuer, own.client_id, own.client_secret!), 401, 'invalid_client');
    });

    it('keeps the registration access token the client sent working when its successor cannot be stored, so the retry succeeds', async () => {
      const own = await registerClient(server.issuer, { client_name: 'Before Outage' });
      const update = () => management(own.registration_client_uri, own.registration_access_token, 'PUT', {
        client_id: own.client_id,
        client_name: 'After Outage',
        redirect_uris: [REDIRECT_URI],
      });
      const db = new DatabaseSync(server.store.slice('sqlite:'.length));
      db.exec("CREATE TRIGGER refuse_registration_tokens BEFORE INSERT ON oidc_models WHEN NEW.model = 'RegistrationAccessToken' BEGIN SELECT RAISE(ABORT, 'no room'); END");
      try {
        expect((await update()).status, 'the rotated token cannot be stored').to.be.at.least(500);
      } finally {
        db.exec('DROP TRIGGER refuse_registration_tokens');
        db.close();
      }
      const retried = await update();
      expect(retried.status, 'the retry with the only token the client holds').to.equal(200);
      const rotated = (await retried.json() as Json).registration_access_token as string;
      expect((await (await management(own.registration_client_uri, rotated)).json() as Json).client_name).to.equal('After Outage');
      await expectRefusal(await management(own.registration_client_uri, own.registration_access_token), 401, 'invalid_token');
    });

    it('refuses DELETE without the registration access token, and the client survives', async () => {
      const own = await registerClient(server.issuer);
      await expectRefusal(await management(own.registration_client_uri, undefined, 'DELETE'), 401, 'invalid_token');
      const read = await management(own.registration_client_uri, own.registration_access_token);
      expect(read.status).to.equal(200);
    });
  });

  describe('redirect URI policy', () => {
    const refused: Array<[string, string, RegExp | undefined]> = [
      ['a relative URI', '/callback', /absolute/i],
      ['a URI with a fragment', 'https://app.example.com/cb#section', /fragment/i],
      ['a wildcard host', 'https://*.example.com/cb', /wildcard/i],
      ['a wildcard path', 'https://app.example.com/*', /wildcard/i],
      ['http on a non-loopback host', 'http://example.com/cb', /https/i],
      ['a javascript: URI', 'javascript:alert(1)', undefined],
      ['a data: URI', 'data:text/html,hello', undefined],
      ['a WebSocket URI', 'wss://app.example.com/cb', /private-use/],
      ['a mailto: URI', 'mailto:someone@example.com', /private-use/],
      ['the out-of-band URN', 'urn:ietf:wg:oauth:2.0:oob', /private-use/],
      ['an https URI naming no host', 'https:///cb', /must name a host/],
      ['loopback written as 127.1', 'http://127.1/cb', /write loopback as 127\.0\.0\.1, \[::1\] or localhost/],
      ['loopback written in hexadecimal', 'http://0x7f000001:8080/cb', /write loopback as/],
      ['the IPv6 loopback written in full', 'http://[0:0:0:0:0:0:0:1]/cb', /write loopback as/],
      ['a character RFC 3986 does not allow', 'https://app.example.com/cb\u00fc', /characters of RFC 3986/],
      ['an angle bracket', 'https://app.example.com/cb<x>', /characters of RFC 3986/],
      ['a percent sign before no two hex digits', 'https://app.example.com/cb%zz', /characters of RFC 3986/],
      ['a quote', 'https://app.example.com/c"b', /characters of RFC 3986/],
    ];
    for (const [label, uri, description] of refused) {
      it(`refuses ${label} (${uri}) with 400 invalid_redirect_uri saying what to fix`, async () => {
        await expectRefusal(await register(server.issuer, { redirect_uris: [uri] }), 400, 'invalid_redirect_uri', description);
      });
    }

    it('names a refused URI back in error_description with only the characters RFC 6749 5.2 allows (RFC 7591 3.2.2: ASCII)', async () => {
      const response = await register(server.issuer, { redirect_uris: ['https://bücher.example/cb#"top"'] });
      const body = await jsonError(response);
      expect([response.status, body.error]).to.deep.equal([400, 'invalid_redirect_uri']);
      expect(body.error_description).to.equal("redirect_uris must not contain a fragment; remove '#...' from 'https://b%C3%BCcher.example/cb#%22top%22'");
    });

    it('refuses a good URI listed next to a bad one', async () => {
      await expectRefusal(
        await register(server.issuer, { redirect_uris: ['https://app.example.com/cb', 'http://example.com/cb'] }),
        400, 'invalid_redirect_uri', /http:\/\/example\.com\/cb/,
      );
    });

    // Registered without application_type: loopback http and private-use schemes are native apps' (RFC 8252).
    const accepted: Array<[string, string, string]> = [
      ['http on 127.0.0.1 with a port', 'http://127.0.0.1:8080/cb', 'native'],
      ['http on localhost', 'http://localhost/cb', 'native'],
      ['http on [::1] with a port', 'http://[::1]:8080/cb', 'native'],
      ['https', 'https://app.example.com/cb', 'web'],
      ['a private-use scheme for a native app (RFC 8252)', 'com.example.app:/callback', 'native'],
      ['a private-use scheme without a period, as MCP hosts register', 'cursor://anysphere.cursor-mcp/oauth/callback', 'native'],
    ];
    for (const [label, uri, applicationType] of accepted) {
      it(`accepts ${label} (${uri}) as a ${applicationType} client`, async () => {
        const response = await register(server.issuer, { redirect_uris: [uri], application_type: undefined });
        expect(response.status, await response.clone().text()).to.equal(201);
        const body = await response.json() as Json;
        expect(body.redirect_uris).to.deep.equal([uri]);
        expect(body.application_type).to.equal(applicationType);
      });
    }
  });

  describe('client_credentials and workspaces', () => {
    it('refuses client_credentials on open registration with invalid_client_metadata that points to the initial access token', async () => {
      const response = await register(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] });
      await expectRefusal(response, 400, 'invalid_client_metadata', /initial access token/i);
    });

    it('revokes a registration access token presented at another client\'s URI (RFC 7592 2.1): its own client\'s URI then refuses it too', async () => {
      const mine = await registerClient(server.issuer);
      const theirs = await registerClient(server.issuer);
      await expectRefusal(await management(theirs.registration_client_uri, mine.registration_access_token), 401, 'invalid_token');
      await expectRefusal(await management(mine.registration_client_uri, mine.registration_access_token), 401, 'invalid_token');
      expect((await management(theirs.registration_client_uri, theirs.registration_access_token)).status, 'the other client\'s own token').to.equal(200);
    });

    it('refuses an initial or registration access token sent in the URL with 400 invalid_request and its Bearer challenge (RFC 6750 2.3, 3), registering nothing', async () => {
      const iat = await initialAccessToken(server, admin.workspaces[0]!.id);
      const before = (await server.admin(['client', 'list', '--json'])).stdout;
      const registration = await fetch(`${server.issuer}/oauth/register?access_token=${encodeURIComponent(iat)}`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'Token In The URL', grant_types: ['client_credentials'], redirect_uris: [] }),
      });
      expect(registration.headers.get('www-authenticate')).to.match(/^Bearer error="invalid_request", error_description="send the access token in the Authorization header/);
      await expectRefusal(registration, 400, 'invalid_request', /Authorization header/);
      expect((await server.admin(['client', 'list', '--json'])).stdout, 'no client registered').to.equal(before);
      expect((await register(server.issuer, { client_name: 'Token In The Header', grant_types: ['client_credentials'], redirect_uris: [] }, iat)).status, 'the token, unused, in the header').to.equal(201);

      const own = await registerClient(server.issuer);
      const read = await fetch(`${own.registration_client_uri}?access_token=${encodeURIComponent(own.registration_access_token)}`);
      expect(read.headers.get('www-authenticate')).to.match(/^Bearer error="invalid_request"/);
      await expectRefusal(read, 400, 'invalid_request', /Authorization header/);
    });

    it('refuses grant_types and response_types that contradict each other, or leave no grant to get a token with (RFC 7591 2.1)', async () => {
      const iat = await initialAccessToken(server, admin.workspaces[0]!.id);
      const cases: Array<[Json, string | undefined, RegExp]> = [
        [{ grant_types: ['client_credentials'], response_types: ['code'], redirect_uris: [] }, iat, /response_types code needs grant_types authorization_code/],
        [{ grant_types: ['authorization_code'], response_types: [] }, undefined, /grant_types authorization_code needs response_types code/],
        [{ grant_types: ['refresh_token'] }, undefined, /refresh_token.*authorization_code/],
      ];
      for (const [metadata, token, description] of cases) {
        await expectRefusal(await register(server.issuer, metadata, token), 400, 'invalid_client_metadata', description);
      }
      // What stock clients send stays accepted: both named and matching, or either left out.
      for (const metadata of [{ grant_types: ['authorization_code'], response_types: ['code'] }, { response_types: ['code'] }, { grant_types: ['authorization_code', 'refresh_token'] }]) {
        expect((await register(server.issuer, metadata)).status, JSON.stringify(metadata)).to.equal(201);
      }
      expect((await register(server.issuer, { grant_types: ['client_credentials'], response_types: [], redirect_uris: [] }, iat)).status).to.equal(201);
    });

    it('keeps a client_credentials token within the scope the client registered (RFC 7591 2), asked for or by default', async () => {
      const iat = await initialAccessToken(server, admin.workspaces[0]!.id);
      const limited = await registerClient(server.issuer, { client_name: 'OpenID Only', grant_types: ['client_credentials'], redirect_uris: [], scope: 'openid' }, iat);
      const ask = (scope?: string) => tokenRequest(server.issuer, {
        grant_type: 'client_credentials', client_id: limited.client_id, client_secret: limited.client_secret!, ...(scope ? { scope } : {}),
      });
      await expectRefusal(await ask('api'), 400, 'invalid_scope', /not allowed: this client is registered for openid/);
      await expectRefusal(await ask(), 400, 'invalid_scope', /no scope was requested, and this client is not registered for the default, api/);
      const allowed = await registerClient(server.issuer, { client_name: 'API', grant_types: ['client_credentials'], redirect_uris: [], scope: 'api' }, await initialAccessToken(server, admin.workspaces[0]!.id));
      const granted = await tokenRequest(server.issuer, { grant_type: 'client_credentials', client_id: allowed.client_id, client_secret: allowed.client_secret! });
      expect(granted.status).to.equal(200);
      expect((await granted.json() as Json).scope).to.equal('api');
    });

    it('keeps an authorization request that names no scope within the scope the client registered: the default it is not registered for is refused', async () => {
      const limited = await registerVettedClient(server, { client_name: 'Profile Only', scope: 'openid profile' });
      const answer = await new UserAgent().follow(codeRequest(server.issuer, limited.client_id, { scope: undefined }).url, server.origin);
      const callback = new URL(answer.url);
      expect(`${callback.origin}${callback.pathname}`, answer.url).to.equal(REDIRECT_URI);
      expect(callback.searchParams.get('error')).to.equal('invalid_scope');
      expect(callback.searchParams.get('error_description')).to.match(/no scope was requested, and this client is not registered for the default, api: ask for one of openid profile/);
      const named = await new UserAgent().follow(codeRequest(server.issuer, limited.client_id, { scope: 'openid profile' }).url, server.origin);
      expect(new URL(named.url).pathname, 'a scope it is registered for goes on to sign-in').to.match(/\/interaction\//);
    });

    it('updates a client stored before that rule with its metadata as read back (RFC 7592 2.2), and refuses an update that makes a contradiction', async () => {
      const iat = await initialAccessToken(server, admin.workspaces[0]!.id);
      const registered = await registerClient(server.issuer, { client_name: 'Stored Before', grant_types: ['client_credentials'], redirect_uris: [] }, iat);
      // As an earlier version stored it: refresh_token beside client_credentials.
      const store = openStore(server.store);
      try {
        const model = store.model('Client');
        const stored = await model.find(registered.client_id);
        await model.upsert(registered.client_id, { ...stored!, grant_types: ['client_credentials', 'refresh_token'] }, undefined);
      } finally {
        await store.close();
      }
      const read = await eventually('the stored client read back', async () => {
        const answer = await management(registered.registration_client_uri, registered.registration_access_token);
        const body = await answer.json() as Json;
        return (body.grant_types as string[]).includes('refresh_token') ? body : undefined;
      }, 5_000);
      const { registration_access_token: _token, registration_client_uri: _uri, client_secret_expires_at: _expiry, client_id_issued_at: _issued, ...metadata } = read;
      const updated = await management(registered.registration_client_uri, registered.registration_access_token, 'PUT', { ...metadata, client_name: 'Stored Before, renamed' });
      expect(updated.status, await updated.clone().text()).to.equal(200);
      const { registration_access_token: rotated } = await updated.json() as Json;
      const contradicting = await management(registered.registration_client_uri, rotated as string, 'PUT', { ...metadata, response_types: ['code'] });
      await expectRefusal(contradicting, 400, 'invalid_client_metadata', /response_types code needs grant_types authorization_code/);
    });

    it('binds a client_credentials client to the workspace of its initial access token', async () => {
      const workspace = admin.workspaces[0]!.id;
      const iat = await initialAccessToken(server, workspace);
      const response = await register(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, iat);
      expect(response.status, await response.clone().text()).to.equal(201);
      const body = await response.json() as Json;
      expect(body.workspace_id).to.equal(workspace);
      expect(body.grant_types).to.deep.equal(['client_credentials']);
      expect(body.client_secret).to.be.a('string').that.is.not.empty;
    });

    it('takes the workspace from the initial access token, never from the body', async () => {
      const other = await seedUser(server, [{ workspace: 'Other Co' }]);
      const iat = await initialAccessToken(server, admin.workspaces[0]!.id);
      const response = await register(server.issuer, {
        grant_types: ['client_credentials'], redirect_uris: [], workspace_id: other.workspaces[0]!.id,
      }, iat);
      expect(response.status).to.equal(201);
      expect((await response.json() as Json).workspace_id).to.equal(admin.workspaces[0]!.id);
    });

    it('does not let a client bind itself by sending workspace_id in the body', async () => {
      const workspace = admin.workspaces[0]!.id;
      const withGrant = await register(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [], workspace_id: workspace });
      await expectRefusal(withGrant, 400, 'invalid_client_metadata');

      const plain = await register(server.issuer, { workspace_id: workspace });
      expect(plain.status).to.equal(201);
      const body = await plain.json() as RegisteredClient;
      expect(body).not.to.have.property('workspace_id');
      const read = await management(body.registration_client_uri, body.registration_access_token);
      expect(await read.json() as Json).not.to.have.property('workspace_id');
    });

    it('refuses a malformed Authorization header with 400 invalid_request rather than registering as if none were sent', async () => {
      const iat = await initialAccessToken(server, admin.workspaces[0]!.id);
      for (const header of [`Bearer ${iat} extra`, 'Bearer', `Basic ${iat}`]) {
        const response = await fetch(`${server.issuer}/oauth/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: header },
          body: JSON.stringify({ redirect_uris: ['https://malformed.example/cb'] }),
        });
        await expectRefusal(response, 400, 'invalid_request');
      }
      const unused = await register(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, iat);
      expect(unused.status, 'the token was not used up').to.equal(201);
    });

    it('refuses an unknown initial access token with 401 invalid_token', async () => {
      const response = await register(server.issuer, {}, 'not-a-real-initial-access-token');
      await expectRefusal(response, 401, 'invalid_token');
      expect(response.headers.get('www-authenticate')).to.match(/^Bearer\b.*invalid_token/);
    });

    it('refuses a forged initial access token naming a real workspace with 401 invalid_token', async () => {
      const forged = `${admin.workspaces[0]!.id}.forged-secret-value`;
      const response = await register(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, forged);
      await expectRefusal(response, 401, 'invalid_token');
    });
  });

  describe('metadata refusals', () => {
    for (const grantTypes of [[], ['urn:example:unknown'], ['password'], ['implicit'], ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code']]) {
      it(`refuses grant_types ${JSON.stringify(grantTypes)} with 400 invalid_client_metadata`, async () => {
        await expectRefusal(await register(server.issuer, { grant_types: grantTypes }), 400, 'invalid_client_metadata', /grant_types/);
      });
    }

    for (const responseTypes of [['token'], ['id_token'], ['code token'], ['bogus']]) {
      it(`refuses response_types ${JSON.stringify(responseTypes)} with 400 invalid_client_metadata`, async () => {
        await expectRefusal(await register(server.issuer, { response_types: responseTypes }), 400, 'invalid_client_metadata', /response_types/);
      });
    }

    it('says a response type is not offered, not that another is missing, for response_types ["code id_token"] or ["code", "none"]', async () => {
      for (const responseTypes of [['code id_token'], ['code', 'none']]) {
        await expectRefusal(await register(server.issuer, { response_types: responseTypes }), 400, 'invalid_client_metadata', /response_types may hold code only.*is not offered/);
      }
    });

    it('refuses a value holding half of a surrogate pair with 400 invalid_client_metadata: no page could show it, no client parse it back', async () => {
      const raw = '{"client_name":"App \\ud800","redirect_uris":["https://app.example.com/cb"]}';
      const response = await fetch(`${server.issuer}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: raw });
      await expectRefusal(response, 400, 'invalid_client_metadata', /client_name must be text: it holds half of a surrogate pair/);
    });

    it('refuses a private_key_jwt client whose jwks holds no key with 400 invalid_client_metadata', async () => {
      await expectRefusal(await register(server.issuer, { token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [] } }), 400, 'invalid_client_metadata', /jwks must hold the public key/);
    });

    it('refuses metadata asking for encryption or for JWT answers it does not give, which it would otherwise drop, with 400 invalid_client_metadata; null is taken as left out', async () => {
      for (const [field, value, why] of [
        ['id_token_encrypted_response_alg', 'RSA-OAEP-256', /encrypts nothing/],
        ['userinfo_encrypted_response_enc', 'A128CBC-HS256', /encrypts nothing/],
        ['request_object_encryption_alg', 'ECDH-ES', /decrypts nothing/],
        ['authorization_signed_response_alg', 'ES256', /JARM/],
        ['introspection_signed_response_alg', 'ES256', /JSON only/],
      ] as const) {
        await expectRefusal(await register(server.issuer, { [field]: value }), 400, 'invalid_client_metadata', new RegExp(`^${field} is not supported: .*${why.source}`));
      }
      expect((await register(server.issuer, { id_token_encrypted_response_alg: null })).status).to.equal(201);
    });

    it('refuses an unknown token_endpoint_auth_method with 400 invalid_client_metadata', async () => {
      await expectRefusal(await register(server.issuer, { token_endpoint_auth_method: 'magic' }), 400, 'invalid_client_metadata', /token_endpoint_auth_method/);
    });
  });

  describe('malformed requests', () => {
    it('refuses a text/plain body with a 400 JSON error', async () => {
      const response = await rawRegister(server.issuer, JSON.stringify({ redirect_uris: [REDIRECT_URI] }), 'text/plain');
      expect(response.status).to.equal(400);
      await jsonError(response);
    });

    it('refuses a body sent without a Content-Type for that, at registration and at an RFC 7592 update, rather than for what it then lacks', async () => {
      const untyped = new TextEncoder().encode(JSON.stringify({ redirect_uris: [REDIRECT_URI] }));
      await expectRefusal(await fetch(`${server.issuer}/oauth/register`, { method: 'POST', body: untyped }), 400, 'invalid_request', /^only application\/json content-type bodies are supported on POST \/oauth\/register$/);
      const own = await registerClient(server.issuer, { client_name: 'Untyped Update' });
      const update = new TextEncoder().encode(JSON.stringify({ client_id: own.client_id, client_name: 'Renamed', redirect_uris: [REDIRECT_URI] }));
      const put = await fetch(own.registration_client_uri, { method: 'PUT', headers: { authorization: `Bearer ${own.registration_access_token}` }, body: update });
      await expectRefusal(put, 400, 'invalid_request', /^only application\/json content-type bodies are supported on PUT /);
      const read = await management(own.registration_client_uri, own.registration_access_token);
      expect((await read.json() as Json).client_name, 'the registration access token still works, nothing changed').to.equal('Untyped Update');
    });

    it('refuses malformed JSON with a 400 JSON error', async () => {
      const response = await rawRegister(server.issuer, '{"redirect_uris": [', 'application/json');
      expect(response.status).to.equal(400);
      await jsonError(response);
    });

    for (const body of ['[]', '"a string"', 'null', '42']) {
      it(`refuses the JSON value ${body} (not an object) with a 400 JSON error`, async () => {
        const response = await rawRegister(server.issuer, body, 'application/json');
        expect(response.status).to.equal(400);
        await jsonError(response);
      });
    }

    it('refuses an oversized (200 KB) body with 400 or 413 and a JSON error, never a 5xx', async () => {
      const body = JSON.stringify({ client_name: 'x'.repeat(200_000), redirect_uris: [REDIRECT_URI] });
      const response = await rawRegister(server.issuer, body, 'application/json');
      expect(response.status).to.be.oneOf([400, 413]);
      await jsonError(response);
    });

    it('still serves registrations after all of the above', async () => {
      expect((await register(server.issuer)).status).to.equal(201);
    });
  });

  describe('REGISTRATION=initial_access_token', () => {
    let user: SeededUser;

    before(async () => {
      user = await seedUser(iatServer, [{ workspace: 'Locked Co' }]);
    });

    it('refuses registration without an initial access token with 401 invalid_token', async () => {
      const response = await register(iatServer.issuer);
      await expectRefusal(response, 401, 'invalid_token');
      expect(response.headers.get('www-authenticate')).to.match(/^Bearer\b/);
    });

    it('refuses an unknown initial access token with 401 invalid_token', async () => {
      await expectRefusal(await register(iatServer.issuer, {}, 'not-a-real-initial-access-token'), 401, 'invalid_token');
    });

    it('accepts a registration with a valid initial access token (raw HTTP and oauth4webapi)', async () => {
      // One token for both registrations: a token registers one client unless made for more.
      const iat = await initialAccessToken(iatServer, user.workspaces[0]!.id, { uses: 2 });
      const response = await register(iatServer.issuer, {}, iat);
      expect(response.status, await response.clone().text()).to.equal(201);
      const body = await response.json() as RegisteredClient;
      expect(body.client_id).to.be.a('string').that.is.not.empty;
      expect(body.redirect_uris).to.deep.equal([REDIRECT_URI]);

      const issuer = new URL(iatServer.issuer);
      const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true }));
      const viaLibrary = await oauth.processDynamicClientRegistrationResponse(await oauth.dynamicClientRegistrationRequest(as, {
        redirect_uris: [REDIRECT_URI], grant_types: ['authorization_code'], token_endpoint_auth_method: 'client_secret_post',
      }, { initialAccessToken: iat, [oauth.allowInsecureRequests]: true }));
      expect(viaLibrary.client_id).to.be.a('string').that.is.not.empty;
      expect(viaLibrary.client_secret).to.be.a('string').that.is.not.empty;
    });
  });
});
