import { hash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';

import { openStore, sqliteFile } from '../../adapters/index.ts';
import { ConfigError, loadConfig } from '../../config/index.ts';
import { authorizationUrl, basicCredentials, codeRequest, exchangeCode, management, postCredentials, REDIRECT_URI, register, registerClient, type RegisteredClient, tokenRequest } from '../support/oauth.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { freePort, initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { sleep } from '../support/wait.ts';

/**
 * Registration hardening: no registration field makes the server
 * connect anywhere; an RFC 7592 update cannot weaken a client (a confidential client stays
 * confidential, a redirect URI added later needs the user's consent, the registration access token
 * is stored hashed and can expire); initial access tokens are single-use by default and expire.
 */

type Json = Record<string, unknown>;

async function expectRefusal(response: Response, status: number, error: string, description?: RegExp): Promise<Json> {
  const text = await response.text();
  expect(response.status, `expected ${status} ${error}, got ${response.status} ${text}`).to.equal(status);
  expect(response.headers.get('content-type')).to.match(/^application\/json/);
  const body = JSON.parse(text) as Json;
  expect(body.error).to.equal(error);
  expect(body.error_description).to.be.a('string').that.is.not.empty;
  if (description) expect(body.error_description).to.match(description);
  return body;
}

/** The metadata an RFC 7592 update sends back for a client registered with the defaults of register(). */
function updateOf(client: RegisteredClient, changes: Json = {}): Json {
  return {
    client_id: client.client_id,
    client_name: client.client_name,
    // As a client sends back what it read: without it, a loopback redirect URI makes the client native.
    application_type: client.application_type,
    redirect_uris: client.redirect_uris,
    grant_types: ['authorization_code'],
    token_endpoint_auth_method: client.token_endpoint_auth_method,
    ...changes,
  };
}


/** A TCP listener on a free loopback port that counts every connection made to it (and closes it). */
async function connectionCounter(): Promise<{ port: number; count(): number; close(): Promise<void> }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const listener: Server = createServer((socket) => {
    connections += 1;
    sockets.add(socket);
    socket.destroy();
  });
  const port = await freePort();
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    port,
    count: () => connections,
    close: () => new Promise((resolve) => {
      for (const socket of sockets) socket.destroy();
      listener.close(() => resolve());
    }),
  };
}

/** Every byte the embedded store has on disk: the database and its write-ahead log. */
async function storeBytes(server: TestServer): Promise<string> {
  const file = sqliteFile(server.store)!;
  const parts = await Promise.all([file, `${file}-wal`].map((path) => readFile(path).catch(() => Buffer.alloc(0))));
  return Buffer.concat(parts).toString('latin1');
}

/** Where an authorization request leads a browser that is already signed in: a page of this server, or a redirect away. */
async function landing(agent: UserAgent, server: TestServer, url: string): Promise<{ page?: string; redirect?: URL }> {
  const { url: at, response } = await agent.follow(url, server.origin);
  if (!at.startsWith(server.origin)) return { redirect: new URL(at) };
  return { page: await response.text() };
}

const isConsentPage = (html: string | undefined) => /<form method="post" action="[^"]*\/consent"/.test(html ?? '');

describe('registration hardening', function () {
  this.timeout(60_000);

  let server: TestServer;
  let user: SeededUser;

  before(async () => {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Hardening Co' }]);
  });

  after(async () => {
    await server?.stop();
  });

  describe('no outbound request on the registrant\'s say-so', () => {
    let listener: Awaited<ReturnType<typeof connectionCounter>>;
    let at: (path: string, scheme?: string) => string;

    before(async () => {
      listener = await connectionCounter();
      at = (path, scheme = 'http') => `${scheme}://127.0.0.1:${listener.port}/${path}`;
    });

    after(async () => {
      await listener?.close();
    });

    /** Asserts, after giving any asynchronous fetch time to start, that nothing connected to the listener. */
    async function expectNoConnection(): Promise<void> {
      await sleep(750);
      expect(listener.count(), 'connections the server made to the URLs the registrant named').to.equal(0);
    }

    for (const scheme of ['https', 'http']) {
      it(`refuses sector_identifier_uri (${scheme}) with 400 invalid_client_metadata, without connecting to it`, async () => {
        const response = await register(server.issuer, { sector_identifier_uri: at('sector.json', scheme) });
        await expectRefusal(response, 400, 'invalid_client_metadata', /sector_identifier_uri.*pairwise/);
        await expectNoConnection();
      });
    }

    it('refuses jwks_uri with 400 invalid_client_metadata for a client that does not authenticate with private_key_jwt, without connecting to it', async () => {
      for (const method of ['client_secret_basic', 'none']) {
        const response = await register(server.issuer, { jwks_uri: at('jwks.json'), token_endpoint_auth_method: method });
        await expectRefusal(response, 400, 'invalid_client_metadata', /jwks_uri/);
      }
      await expectNoConnection();
    });

    it('registers, reads, updates and uses a client with every other URL field pointing at the listener, and never connects', async () => {
      const urls = (label: string): Json => ({
        logo_uri: at(`${label}/logo.png`),
        client_uri: at(`${label}/`),
        policy_uri: at(`${label}/policy`),
        tos_uri: at(`${label}/tos`),
        initiate_login_uri: at(`${label}/login`, 'https'),
        request_uris: [at(`${label}/request.jwt`)],
        backchannel_logout_uri: at(`${label}/backchannel-logout`),
        frontchannel_logout_uri: at(`${label}/frontchannel-logout`),
        post_logout_redirect_uris: [at(`${label}/signed-out`)],
        backchannel_client_notification_endpoint: at(`${label}/ciba`),
        redirect_uris: [at(`${label}/callback`)],
      });
      const response = await register(server.issuer, urls('registered'));
      expect(response.status, await response.clone().text()).to.equal(201);
      const client = await response.json() as RegisteredClient;
      // What the server keeps: the display URIs (the browser loads them, never the server) and the redirect URIs (the browser is sent there).
      expect(client).to.include({ logo_uri: at('registered/logo.png'), policy_uri: at('registered/policy'), tos_uri: at('registered/tos') });
      expect(client.post_logout_redirect_uris).to.deep.equal([at('registered/signed-out')]);
      // Metadata of features that are off is ignored (RFC 7591 2): not registered, never used.
      for (const ignored of ['request_uris', 'backchannel_logout_uri', 'frontchannel_logout_uri', 'backchannel_client_notification_endpoint']) {
        expect(client, ignored).not.to.have.property(ignored);
      }

      // Used: read back, an authorization request (the engine loads the client), a token request.
      expect((await management(client.registration_client_uri, client.registration_access_token)).status).to.equal(200);
      const authorization = await fetch(codeRequest(server.issuer, client.client_id, { redirect_uri: at('registered/callback') }).url, { redirect: 'manual' });
      expect(authorization.status).to.equal(303);
      const token = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: 'not-a-refresh-token', ...postCredentials(client) });
      expect(token.status).to.equal(400);

      // Updated (RFC 7592) with every field pointing at the listener again.
      const updated = await management(client.registration_client_uri, client.registration_access_token, 'PUT', updateOf(client, urls('updated')));
      expect(updated.status, await updated.clone().text()).to.equal(200);
      const rotated = (await updated.json() as RegisteredClient).registration_access_token;
      // An update may not bring in what registration refuses.
      for (const [field, value] of [['sector_identifier_uri', at('sector.json', 'https')], ['jwks_uri', at('jwks.json')]] as const) {
        const refused = await management(client.registration_client_uri, rotated, 'PUT', updateOf(client, { ...urls('updated'), [field]: value }));
        await expectRefusal(refused, 400, 'invalid_client_metadata', new RegExp(field));
      }
      await expectNoConnection();
    });

    it('never fetches the sector_identifier_uri of a client stored before it was refused', async () => {
      const clientId = 'cl_stored_with_sector_identifier_uri';
      const store = openStore(server.store);
      try {
        await store.model('Client').upsert(clientId, {
          client_id: clientId,
          client_name: 'Legacy',
          redirect_uris: [REDIRECT_URI],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
          sector_identifier_uri: at('legacy-sector.json', 'https'),
        }, undefined);
      } finally {
        await store.close();
      }
      const authorization = await fetch(codeRequest(server.issuer, clientId).url, { redirect: 'manual' });
      expect(authorization.status, 'the client is loaded and the request goes on to sign-in').to.equal(303);
      await expectNoConnection();
    });
  });

  describe('RFC 7592 updates cannot weaken a client', () => {
    /** A confidential client with a refresh token from a real sign-in and consent. */
    async function withRefreshToken(method: string): Promise<{ client: RegisteredClient; refreshToken: string }> {
      const client = await registerClient(server.issuer, { client_name: 'Confidential App', token_endpoint_auth_method: method });
      const request = codeRequest(server.issuer, client.client_id);
      const callback = await authorize(new UserAgent(), request.url, server.origin, user);
      const exchanged = method === 'client_secret_basic'
        ? await tokenRequest(server.issuer, { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: REDIRECT_URI, code_verifier: request.verifier }, basicCredentials(client))
        : await exchangeCode(server.issuer, client, callback.searchParams.get('code')!, request.verifier);
      expect(exchanged.status, await exchanged.clone().text()).to.equal(200);
      return { client, refreshToken: (await exchanged.json() as { refresh_token: string }).refresh_token };
    }

    for (const method of ['client_secret_basic', 'client_secret_post']) {
      it(`refuses to change token_endpoint_auth_method from ${method} to none (400), and the refresh token still needs the secret`, async () => {
        const { client, refreshToken } = await withRefreshToken(method);
        const response = await management(client.registration_client_uri, client.registration_access_token, 'PUT', updateOf(client, { token_endpoint_auth_method: 'none' }));
        await expectRefusal(response, 400, 'invalid_client_metadata', /token_endpoint_auth_method.*none.*confidential/);

        const read = await management(client.registration_client_uri, client.registration_access_token);
        expect((await read.json() as Json).token_endpoint_auth_method, 'the client is unchanged').to.equal(method);
        const withIdAlone = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.client_id });
        await expectRefusal(withIdAlone, 401, 'invalid_client');
        const withSecret = method === 'client_secret_basic'
          ? await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken }, basicCredentials(client))
          : await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });
        expect(withSecret.status, await withSecret.clone().text()).to.equal(200);
      });
    }

    it('still lets a confidential client move between client_secret_basic and client_secret_post', async () => {
      const client = await registerClient(server.issuer, { token_endpoint_auth_method: 'client_secret_basic' });
      const response = await management(client.registration_client_uri, client.registration_access_token, 'PUT', updateOf(client, { token_endpoint_auth_method: 'client_secret_post' }));
      expect(response.status, await response.clone().text()).to.equal(200);
      expect((await response.json() as Json).token_endpoint_auth_method).to.equal('client_secret_post');
    });

    describe('a redirect URI added by an update', () => {
      const ADDED = 'http://127.0.0.1:9/added';
      const ALSO_ADDED = 'http://127.0.0.1:9/also-added';
      let client: RegisteredClient;
      let rat: string;
      let agent: UserAgent;

      before(async () => {
        client = await registerClient(server.issuer, { client_name: 'Growing App' });
        rat = client.registration_access_token;
        agent = new UserAgent();
        const first = await authorize(agent, codeRequest(server.issuer, client.client_id).url, server.origin, user);
        expect(first.searchParams.get('code'), 'consent given for the registered redirect URI').to.be.a('string');
      });

      async function update(redirectUris: string[], extra: Json = {}): Promise<Json> {
        const response = await management(client.registration_client_uri, rat, 'PUT', updateOf(client, { redirect_uris: redirectUris, ...extra }));
        expect(response.status, await response.clone().text()).to.equal(200);
        const body = await response.json() as Json;
        rat = body.registration_access_token as string;
        // Consent counts from the second after a URI was added (times are whole seconds): the next one.
        await sleep(1050 - (Date.now() % 1000));
        return body;
      }

      it('before any update, a signed-in user who consented is sent straight back (no consent page)', async () => {
        const { redirect, page } = await landing(agent, server, codeRequest(server.issuer, client.client_id).url);
        expect(page, 'no page shown').to.equal(undefined);
        expect(redirect!.origin + redirect!.pathname).to.equal(REDIRECT_URI);
        expect(redirect!.searchParams.get('code')).to.be.a('string');
      });

      it('shows the consent page again for the new redirect URI, and not for the one consented to', async () => {
        const body = await update([REDIRECT_URI, ADDED]);
        expect(body.redirect_uris).to.deep.equal([REDIRECT_URI, ADDED]);
        expect(body, 'what the server keeps about the URIs is not shown').not.to.have.property('redirect_uris_added_at');
        const read = await management(client.registration_client_uri, rat);
        expect(await read.json() as Json).not.to.have.property('redirect_uris_added_at');

        const toAdded = await landing(agent, server, codeRequest(server.issuer, client.client_id, { redirect_uri: ADDED }).url);
        expect(toAdded.redirect, `sent to ${toAdded.redirect?.href} without being asked`).to.equal(undefined);
        expect(isConsentPage(toAdded.page), 'the consent page').to.equal(true);

        const toConsented = await landing(agent, server, codeRequest(server.issuer, client.client_id).url);
        expect(toConsented.redirect?.searchParams.get('code'), 'the URI consented to still needs no new consent').to.be.a('string');
      });

      it('refuses silent authentication (prompt=none) to the new redirect URI with consent_required', async () => {
        const { redirect } = await landing(agent, server, codeRequest(server.issuer, client.client_id, { redirect_uri: ADDED, prompt: 'none' }).url);
        expect(redirect!.origin + redirect!.pathname).to.equal(ADDED);
        expect(redirect!.searchParams.get('error')).to.equal('consent_required');
        expect(redirect!.searchParams.get('code')).to.equal(null);
      });

      it('once the user consents for the new redirect URI, it works and needs no more consent', async () => {
        const request = codeRequest(server.issuer, client.client_id, { redirect_uri: ADDED });
        const callback = await authorize(agent, request.url, server.origin, user);
        expect(callback.origin + callback.pathname).to.equal(ADDED);
        const exchanged = await exchangeCode(server.issuer, client, callback.searchParams.get('code')!, request.verifier, { redirect_uri: ADDED });
        expect(exchanged.status, await exchanged.clone().text()).to.equal(200);

        const again = await landing(agent, server, codeRequest(server.issuer, client.client_id, { redirect_uri: ADDED }).url);
        expect(again.redirect?.searchParams.get('code')).to.be.a('string');
      });

      it('cannot be backdated: redirect_uris_added_at in an update is ignored', async () => {
        await update([REDIRECT_URI, ADDED, ALSO_ADDED], { redirect_uris_added_at: { [ALSO_ADDED]: 0 } });
        const { page } = await landing(agent, server, codeRequest(server.issuer, client.client_id, { redirect_uri: ALSO_ADDED }).url);
        expect(isConsentPage(page)).to.equal(true);
        // The URIs kept from before keep the consent they had.
        const kept = await landing(agent, server, codeRequest(server.issuer, client.client_id, { redirect_uri: ADDED }).url);
        expect(kept.redirect?.searchParams.get('code')).to.be.a('string');
      });

      it('a redirect URI removed and added again needs consent again', async () => {
        await update([REDIRECT_URI, ALSO_ADDED]);
        await update([REDIRECT_URI, ALSO_ADDED, ADDED]);
        const { page } = await landing(agent, server, codeRequest(server.issuer, client.client_id, { redirect_uri: ADDED }).url);
        expect(isConsentPage(page)).to.equal(true);
      });

      it('another user, or the same user in a new browser, is asked as always', async () => {
        const fresh = new UserAgent();
        const { page } = await landing(fresh, server, authorizationUrl(server.issuer, codeRequest(server.issuer, client.client_id).params));
        expect(page, 'the sign-in page').to.match(/<form method="post" action="[^"]*\/login"/);
      });
    });
  });

  describe('the registration access token', () => {
    it('is stored only as its SHA-256 digest, and each update replaces it', async () => {
      const client = await registerClient(server.issuer, { client_name: 'Stored RAT' });
      const first = client.registration_access_token;
      let bytes = await storeBytes(server);
      expect(bytes.includes(first), 'the token in the SQLite file').to.equal(false);
      expect(bytes.includes(hash('sha256', first, 'base64url')), 'its digest, the record\'s id').to.equal(true);

      const updated = await management(client.registration_client_uri, first, 'PUT', updateOf(client, { client_name: 'Stored RAT 2' }));
      expect(updated.status).to.equal(200);
      const second = (await updated.json() as RegisteredClient).registration_access_token;
      expect(second).to.be.a('string').and.not.equal(first);
      await expectRefusal(await management(client.registration_client_uri, first), 401, 'invalid_token');
      expect((await management(client.registration_client_uri, second)).status).to.equal(200);
      bytes = await storeBytes(server);
      expect(bytes.includes(second)).to.equal(false);
    });

    it('lives as long as its client unless REGISTRATION_ACCESS_TOKEN_TTL is set (a duration, checked at start)', () => {
      expect(loadConfig({}).registrationAccessTokenTtl).to.equal(undefined);
      expect(loadConfig({ REGISTRATION_ACCESS_TOKEN_TTL: '30d' }).registrationAccessTokenTtl).to.equal(30 * 86_400);
      expect(loadConfig({ REGISTRATION_ACCESS_TOKEN_TTL: '3600' }).registrationAccessTokenTtl).to.equal(3600);
      for (const bad of ['soon', '0', '-5', '1w']) {
        expect(() => loadConfig({ REGISTRATION_ACCESS_TOKEN_TTL: bad }), bad).to.throw(ConfigError, /REGISTRATION_ACCESS_TOKEN_TTL/);
      }
    });

    describe('with REGISTRATION_ACCESS_TOKEN_TTL', () => {
      const TTL = 4;
      let expiring: TestServer;

      before(async () => {
        expiring = await startServer({ env: { REGISTRATION_ACCESS_TOKEN_TTL: `${TTL}s` } });
      });

      after(async () => {
        await expiring?.stop();
      });

      it('expires: 401 invalid_token after its lifetime; an update gives a new token a full lifetime', async () => {
        const registeredAt = Date.now();
        const client = await registerClient(expiring.issuer, { client_name: 'Expiring RAT' });
        expect((await management(client.registration_client_uri, client.registration_access_token)).status).to.equal(200);

        await sleep(2500);
        const updated = await management(client.registration_client_uri, client.registration_access_token, 'PUT', updateOf(client, { client_name: 'Renewed' }));
        expect(updated.status, await updated.clone().text()).to.equal(200);
        const updatedAt = Date.now();
        const renewed = (await updated.json() as RegisteredClient).registration_access_token;

        // Past the first token's lifetime (at most TTL s from registration), within the new one's (at least TTL - 1 s from the update).
        await sleep(Math.max(0, registeredAt + TTL * 1000 + 500 - Date.now()));
        expect((await management(client.registration_client_uri, renewed)).status, 'the renewed token').to.equal(200);

        await sleep(Math.max(0, updatedAt + TTL * 1000 + 500 - Date.now()));
        const expired = await management(client.registration_client_uri, renewed);
        await expectRefusal(expired, 401, 'invalid_token');
        expect(expired.headers.get('www-authenticate')).to.match(/^Bearer\b/);
      });
    });
  });

  describe('initial access tokens', () => {
    async function iatCreate(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
      return server.admin(['iat', 'create', '--workspace', user.workspaces[0]!.id, ...args]);
    }

    const machine = { grant_types: ['client_credentials'], redirect_uris: [] };

    it('iat create says what the token allows and when it expires: one registration and 24 hours by default', async () => {
      const before = Date.now();
      const json = await iatCreate(['--json']);
      expect(json.code, json.stderr).to.equal(0);
      const created = JSON.parse(json.stdout) as { initial_access_token: string; workspace_id: string; uses: number; expires_in: number; expires_at: string };
      expect(created).to.include({ workspace_id: user.workspaces[0]!.id, uses: 1, expires_in: 86_400 });
      const expiresAt = Date.parse(created.expires_at);
      expect(expiresAt).to.be.within(before + 86_400_000 - 2000, Date.now() + 86_400_000 + 2000);

      const text = await iatCreate([]);
      expect(text.code, text.stderr).to.equal(0);
      expect(text.stdout).to.match(/registers one client/).and.match(/expires \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/);
      const several = await iatCreate(['--uses', '3', '--expires-in', '30m']);
      expect(several.stdout).to.match(/registers up to 3 clients/);
      const shown = new Date(/expires (\S+);/.exec(several.stdout)![1]!).getTime();
      expect(shown - Date.now()).to.be.within(1800_000 - 5000, 1800_000 + 1000);
    });

    it('registers one client: a second registration with it gets 401 invalid_token', async () => {
      const iat = await initialAccessToken(server, user.workspaces[0]!.id);
      expect((await register(server.issuer, machine, iat)).status).to.equal(201);
      const again = await register(server.issuer, { client_name: 'Second try' }, iat);
      await expectRefusal(again, 401, 'invalid_token', /used up/);
      expect(again.headers.get('www-authenticate')).to.match(/^Bearer\b.*invalid_token/);
      // Used up, it is gone: whatever the metadata, the answer is about the token.
      await expectRefusal(await register(server.issuer, { grant_types: ['password'] }, iat), 401, 'invalid_token');
    });

    it('is not used up by a registration that is refused for its metadata', async () => {
      const iat = await initialAccessToken(server, user.workspaces[0]!.id);
      await expectRefusal(await register(server.issuer, { grant_types: ['password'] }, iat), 400, 'invalid_client_metadata');
      await expectRefusal(await register(server.issuer, { sector_identifier_uri: 'https://127.0.0.1:1/s' }, iat), 400, 'invalid_client_metadata');
      expect((await register(server.issuer, machine, iat)).status).to.equal(201);
      await expectRefusal(await register(server.issuer, machine, iat), 401, 'invalid_token');
    });

    it('is not used up by a registration the store fails to complete: the retry registers, and nothing of the failed one is kept', async () => {
      const iat = await initialAccessToken(server, user.workspaces[0]!.id);
      const db = new DatabaseSync(server.store.slice('sqlite:'.length));
      const clients = () => (db.prepare("SELECT count(*) AS n FROM oidc_models WHERE model = 'Client'").get() as { n: number }).n;
      try {
        const before = clients();
        db.exec("CREATE TRIGGER refuse_registration_tokens BEFORE INSERT ON oidc_models WHEN NEW.model = 'RegistrationAccessToken' BEGIN SELECT RAISE(ABORT, 'no room'); END");
        try {
          expect((await register(server.issuer, machine, iat)).status).to.be.at.least(500);
        } finally {
          db.exec('DROP TRIGGER refuse_registration_tokens');
        }
        expect(clients(), 'the client the failed registration stored').to.equal(before);
        expect((await register(server.issuer, machine, iat)).status, 'the retry').to.equal(201);
        expect(clients()).to.equal(before + 1);
      } finally {
        db.close();
      }
    });

    it('registers up to N clients when made with --uses N', async () => {
      const iat = await initialAccessToken(server, user.workspaces[0]!.id, { uses: 3 });
      for (let i = 0; i < 3; i += 1) expect((await register(server.issuer, machine, iat)).status, `registration ${i + 1}`).to.equal(201);
      await expectRefusal(await register(server.issuer, machine, iat), 401, 'invalid_token');
    });

    it('expires: 401 invalid_token once its --expires-in has passed', async () => {
      const iat = await initialAccessToken(server, user.workspaces[0]!.id, { uses: 5, expiresIn: '2' });
      await sleep(3100);
      await expectRefusal(await register(server.issuer, machine, iat), 401, 'invalid_token');
    });

    it('refuses a bad --uses or --expires-in with a message naming it', async () => {
      for (const uses of ['0', '-1', 'two', '1.5', '10001']) {
        const result = await iatCreate(['--uses', uses]);
        expect(result.code, uses).to.equal(2);
        expect(result.stderr).to.contain('--uses');
        expect(result.stdout).to.equal('');
      }
      for (const expiresIn of ['soon', '0', '1w', '999999999d']) {
        const result = await iatCreate(['--expires-in', expiresIn]);
        expect(result.code, expiresIn).to.equal(2);
        expect(result.stderr).to.contain('--expires-in');
      }
    });

    it('treats a token made before uses were counted as single-use', async () => {
      const token = `${user.workspaces[0]!.id}.legacy-token-${Date.now()}-with-enough-random-looking-length`;
      const now = Math.floor(Date.now() / 1000);
      const store = openStore(server.store);
      try {
        await store.model('InitialAccessToken').upsert(hash('sha256', token, 'base64url'), { iat: now, exp: now + 600, kind: 'InitialAccessToken' }, 600);
      } finally {
        await store.close();
      }
      expect((await register(server.issuer, machine, token)).status).to.equal(201);
      await expectRefusal(await register(server.issuer, machine, token), 401, 'invalid_token');
    });

    const backends: Array<{ name: string; start(): Promise<{ server: TestServer; stop(): Promise<void> }> }> = [
      { name: 'SQLite', start: async () => ({ server, stop: async () => {} }) },
      {
        name: 'Redis',
        async start() {
          const redis: RedisServer = await startRedis();
          const onRedis = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') } });
          return { server: onRedis, stop: async () => { await onRedis.stop(); await redis.stop(); } };
        },
      },
    ];
    for (const backend of backends) {
      it(`on ${backend.name}: registrations racing for a token's uses never get more than it allows, and the losers store no client`, async () => {
        const { server: target, stop } = await backend.start();
        try {
          const owner = target === server ? user : await seedUser(target, [{ workspace: 'Race Co' }]);
          const workspace = owner.workspaces[0]!.id;
          const countClients = async () => {
            const listed = await target.admin(['client', 'list', '--json']);
            return (JSON.parse(listed.stdout) as Json[]).filter((client) => client.workspace_id === workspace).length;
          };
          const clientsBefore = await countClients();
          let created = 0;
          for (const uses of [1, 1, 1, 2, 3]) {
            const iat = await initialAccessToken(target, workspace, { uses });
            const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => register(target.issuer, { ...machine, client_name: `Racer ${i}` }, iat)));
            const statuses = answers.map((answer) => answer.status);
            expect(statuses.filter((status) => status === 201), `uses ${uses}: ${statuses.join(',')}`).to.have.length(uses);
            expect(statuses.filter((status) => status === 401), `uses ${uses}: ${statuses.join(',')}`).to.have.length(6 - uses);
            for (const answer of answers.filter(({ status }) => status === 401)) await expectRefusal(answer, 401, 'invalid_token');
            created += uses;
          }
          expect(await countClients() - clientsBefore, 'clients stored').to.equal(created);
        } finally {
          await stop();
        }
      });
    }
  });
});
