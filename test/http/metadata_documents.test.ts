import type { ServerResponse } from 'node:http';
import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';
import { SignJWT } from 'jose';

import { startDocumentServer, type DocumentServer } from '../support/document_server.ts';
import { clientKey, type ClientKey } from '../support/keys.ts';
import { openStore } from '../../adapters/index.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { MetadataDocuments } from '../../src/clients/metadata_documents.ts';
import { digest } from '../../src/shared/digest.ts';
import { authorizationUrl, pkcePair, postForm } from '../support/oauth.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';
import { testCertificates, type TestCertificates } from '../support/tls.ts';

/**
 * Client ID Metadata Documents as an attacker or a careless client would use them: every document
 * the server must refuse is refused on a page (never sent to a redirect URI it could not check),
 * and every URL it must not fetch is refused before any connection is made, which listeners on
 * loopback (IPv4 and IPv6) that count their connections show. The happy path with a stock MCP
 * client is in test/interop/mcp_cimd.test.ts; the cache's timing in test/unit/metadata_document_cache.test.ts.
 */
describe('Client ID Metadata Documents: what the server refuses', function () {
  this.timeout(60_000);

  const REDIRECT = 'http://127.0.0.1:9/callback';
  let certificates: TestCertificates;
  /** The trusted document server (CIMD_TRUSTED_HOSTS names it). */
  let documents: DocumentServer;
  /** Listeners on loopback the server is not told to trust: they must never see a connection. */
  let untrusted: DocumentServer;
  let untrustedV6: DocumentServer;
  let server: TestServer;

  before(async () => {
    certificates = await testCertificates();
    documents = await startDocumentServer(certificates);
    untrusted = await startDocumentServer(certificates);
    untrustedV6 = await startDocumentServer(certificates, '::1');
    server = await startServer({ env: { NODE_EXTRA_CA_CERTS: certificates.caFile, CIMD_TRUSTED_HOSTS: `localhost:${documents.port}` } });
  });

  after(async () => {
    await server?.stop();
    await Promise.all([documents?.stop(), untrusted?.stop(), untrustedV6?.stop()]);
    await certificates?.remove();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-30).join('\n'));
  });

  /** A document as a public client publishes it, for client_id `url`. */
  function document(url: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      client_id: url,
      client_name: 'Document Client',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      ...overrides,
    };
  }

  /** Publishes a document at `path` on the trusted server; returns its URL, the client_id. */
  function publish(path: string, overrides: Record<string, unknown> = {}, headers: Record<string, string> = {}): string {
    const url = `${documents.origin}${path}`;
    documents.serve(path, document(url, overrides), headers);
    return url;
  }

  /** The authorization request of client `clientId`, not followed. */
  async function authorizeAs(target: TestServer, clientId: string, redirectUri = REDIRECT): Promise<{ status: number; location: string | null; text: string }> {
    const url = authorizationUrl(target.issuer, {
      client_id: clientId, response_type: 'code', redirect_uri: redirectUri, scope: 'api', state: 'state-1',
      code_challenge: pkcePair().challenge, code_challenge_method: 'S256',
    });
    const response = await fetch(url, { redirect: 'manual' });
    return { status: response.status, location: response.headers.get('location'), text: await response.text() };
  }

  /** Refused on the server's own page: nothing goes to a redirect URI. */
  function expectRefusedOnPage(answer: { status: number; location: string | null; text: string }, what: string): void {
    expect(answer.status, `${what}: ${answer.text.slice(0, 300)}`).to.equal(400);
    expect(answer.location, what).to.equal(null);
    expect(answer.text, what).to.match(/<html/i);
  }

  /** The operator's log says why the last request for `clientId` was refused. */
  async function expectLoggedReason(target: TestServer, clientId: string, reason: RegExp): Promise<void> {
    const refusal = await eventually(`a refusal of ${clientId} in the log`, () => target.logs().split('\n')
      .filter((line) => line.includes('"request refused"') && line.includes(`"client_id":"${clientId}"`)).at(-1), 5_000);
    expect((JSON.parse(refusal) as { detail: string }).detail).to.match(reason);
  }

  it('accepts a good document: the user is sent on to sign in (control for the refusals below)', async () => {
    const answer = await authorizeAs(server, publish('/good.json'));
    expect(answer.status, answer.text.slice(0, 300)).to.be.oneOf([302, 303]);
    expect(answer.location).to.contain('/interaction/');
  });

  it('accepts a document with only the fields the MCP specification requires (client_id, client_name, redirect_uris): a public client', async () => {
    const url = `${documents.origin}/minimal.json`;
    documents.serve('/minimal.json', { client_id: url, client_name: 'Minimal Client', redirect_uris: [REDIRECT] });
    const answer = await authorizeAs(server, url);
    expect(answer.status, answer.text.slice(0, 300)).to.be.oneOf([302, 303]);
    expect(answer.location).to.contain('/interaction/');
  });

  it('takes a document whose every redirect URI is loopback http as a native app: any port matches', async () => {
    const url = publish('/native.json', { redirect_uris: ['http://127.0.0.1/callback'] });
    const answer = await authorizeAs(server, url, 'http://127.0.0.1:49152/callback');
    expect(answer.status, answer.text.slice(0, 300)).to.be.oneOf([302, 303]);
    expect(answer.location).to.contain('/interaction/');
    const web = publish('/web.json', { redirect_uris: ['https://app.example/callback', 'http://127.0.0.1:8080/callback'] });
    expectRefusedOnPage(await authorizeAs(server, web, 'http://127.0.0.1:49152/callback'), 'a web client on another port');
  });

  it('holds an error on a page rather than sending it to the document\'s redirect URI, as for any client no administrator checked', async () => {
    const url = publish('/held.json');
    const request = authorizationUrl(server.issuer, {
      client_id: url, response_type: 'code', redirect_uri: REDIRECT, scope: 'api unknown-scope', state: 'state-1',
      code_challenge: pkcePair().challenge, code_challenge_method: 'S256',
    });
    const response = await fetch(request, { redirect: 'manual' });
    expect(response.status).to.equal(400);
    expect(response.headers.get('location')).to.equal(null);
    const page = await response.text();
    expect(page).to.include('invalid_scope').and.include('Return to');
  });

  it('fetches a new document once for concurrent authorizations naming it', async () => {
    const url = publish('/concurrent.json', {}, { 'cache-control': 'max-age=3600' });
    const answers = await Promise.all(Array.from({ length: 10 }, () => authorizeAs(server, url)));
    for (const answer of answers) expect(answer.status, answer.text.slice(0, 300)).to.be.oneOf([302, 303]);
    expect(documents.requests('/concurrent.json')).to.equal(1);
  });

  it('refuses a document whose client_id is not its own URL', async () => {
    const url = `${documents.origin}/mismatch.json`;
    documents.serve('/mismatch.json', document(`${documents.origin}/someone-else.json`));
    expectRefusedOnPage(await authorizeAs(server, url), 'mismatched client_id');
    await expectLoggedReason(server, url, /client_id does not match/);
    expect(documents.requests('/mismatch.json')).to.equal(1);
  });

  it('answers a document that cannot be used with 401 invalid_client at every endpoint that authenticates clients, the first time and while the failure is remembered', async () => {
    const unusable: Record<string, (url: string) => Record<string, unknown>> = {
      'a client_id that is not its URL': (url) => document(`${url}x`),
      'a client_secret': (url) => document(url, { client_secret: 'a-secret' }),
      'a redirect URI on http off loopback': (url) => document(url, { redirect_uris: ['http://example.com/callback'] }),
    };
    const requests: Record<string, (clientId: string) => Record<string, string>> = {
      token: (clientId) => ({ grant_type: 'refresh_token', refresh_token: 'x', client_id: clientId }),
      revoke: (clientId) => ({ token: 'x', client_id: clientId }),
      introspect: (clientId) => ({ token: 'x', client_id: clientId }),
      par: (clientId) => ({ client_id: clientId, response_type: 'code', redirect_uri: REDIRECT, scope: 'api', code_challenge: pkcePair().challenge, code_challenge_method: 'S256' }),
    };
    for (const [what, unusableDocument] of Object.entries(unusable)) {
      for (const [endpoint, form] of Object.entries(requests)) {
        const path = `/unusable-${endpoint}-${what.replaceAll(' ', '-')}.json`;
        const url = `${documents.origin}${path}`;
        documents.serve(path, unusableDocument(url));
        for (const attempt of ['first', 'remembered']) {
          const response = await postForm(`${server.issuer}/oauth/${endpoint}`, form(url));
          const body = await response.json() as { error?: string };
          expect([response.status, body.error], `${what} at ${endpoint}, ${attempt}`).to.deep.equal([401, 'invalid_client']);
        }
      }
    }
  });

  it('refuses a redirect URI the document does not list', async () => {
    const url = publish('/redirects.json');
    expectRefusedOnPage(await authorizeAs(server, url, 'http://127.0.0.1:9/elsewhere'), 'unlisted path');
    expectRefusedOnPage(await authorizeAs(server, url, 'https://attacker.example/callback'), 'unlisted host');
    await expectLoggedReason(server, url, /redirect_uri did not match/);
  });

  it('refuses a document asking for a secret-based client authentication, a secret, or client credentials', async () => {
    for (const [path, overrides, reason] of [
      ['/basic.json', { token_endpoint_auth_method: 'client_secret_basic' }, /shared-secret/],
      ['/post.json', { token_endpoint_auth_method: 'client_secret_post' }, /shared-secret/],
      ['/secret.json', { client_secret: 'shh' }, /client_secret/],
      ['/machine.json', { grant_types: ['authorization_code', 'client_credentials'] }, /client_credentials/],
    ] as const) {
      const url = publish(path, overrides);
      expectRefusedOnPage(await authorizeAs(server, url), path);
      await expectLoggedReason(server, url, reason);
    }
  });

  it('refuses a document larger than a registration may be, declared or streamed', async () => {
    const padding = 'x'.repeat(20_000);
    const declared = publish('/large.json', { client_name: 'Large', logo_uri: `https://example.com/${padding}` });
    expectRefusedOnPage(await authorizeAs(server, declared), 'oversized');
    await expectLoggedReason(server, declared, /more than 16384 bytes/);
    documents.serve('/streamed.json', (_request, response: ServerResponse) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      const open = `{"client_id":"${documents.origin}/streamed.json","client_name":"`;
      response.write(open);
      for (let i = 0; i < 40; i += 1) response.write('y'.repeat(1000));
      response.end('"}');
    });
    expectRefusedOnPage(await authorizeAs(server, `${documents.origin}/streamed.json`), 'streamed oversized');
    await expectLoggedReason(server, `${documents.origin}/streamed.json`, /more than 16384 bytes/);
  });

  it('refuses a document that does not come in time, and answers the user meanwhile', async () => {
    const held: ServerResponse[] = [];
    documents.serve('/slow.json', (_request, response) => { held.push(response); });
    const started = Date.now();
    expectRefusedOnPage(await authorizeAs(server, `${documents.origin}/slow.json`), 'slow');
    expect(Date.now() - started, 'answered at the fetch deadline, not when the document server gave up').to.be.below(15_000);
    await expectLoggedReason(server, `${documents.origin}/slow.json`, /did not answer within the time allowed/);
    for (const response of held) response.destroy();
  });

  it('follows no redirect: a document URL answering 302 is refused, and the target is never asked', async () => {
    const target = publish('/target.json');
    documents.serve('/moved.json', (_request, response) => { response.writeHead(302, { location: target }).end(); });
    expectRefusedOnPage(await authorizeAs(server, `${documents.origin}/moved.json`), 'redirecting');
    expect(documents.requests('/target.json')).to.equal(0);
    await expectLoggedReason(server, `${documents.origin}/moved.json`, /answered 302/);
  });

  it('never connects to a client_id URL on loopback, private, or IPv6 addresses it was not told to trust', async () => {
    for (const listener of [untrusted, untrustedV6]) listener.serve('/client.json', document('(any)'));
    const urls = [
      `https://localhost:${untrusted.port}/client.json`,
      `https://127.0.0.1:${untrusted.port}/client.json`,
      `https://127.1.2.3:${untrusted.port}/client.json`,
      `https://[::ffff:7f00:1]:${untrusted.port}/client.json`,
      `https://[::1]:${untrustedV6.port}/client.json`,
      `https://10.0.0.1:${untrusted.port}/client.json`,
      `https://192.168.1.1:${untrusted.port}/client.json`,
      `https://169.254.169.254/latest/meta-data.json`,
      `https://[fd00::1]:${untrustedV6.port}/client.json`,
      // The trusted host:port by address instead of by name: trust is for the name given.
      `https://127.0.0.1:${documents.port}/good.json`,
    ];
    const trustedConnections = documents.connections();
    for (const url of urls) {
      expectRefusedOnPage(await authorizeAs(server, url), url);
      await expectLoggedReason(server, url, /non-public address/);
    }
    expect(untrusted.connections(), 'connections to the untrusted IPv4 listener').to.equal(0);
    expect(untrustedV6.connections(), 'connections to the untrusted IPv6 listener').to.equal(0);
    expect(documents.connections() - trustedConnections, 'connections to the trusted port by address').to.equal(0);
  });

  it('says why a document could not be fetched or read, to the client at the token endpoint and to the person on the page, and never the address a name resolved to', async () => {
    documents.serve('/gone.json', (_request, response) => { response.writeHead(404).end(); });
    documents.serve('/not-json.json', (_request, response) => response.end('<html>not a document</html>'));
    const cases: Array<[string, RegExp]> = [
      [`${documents.origin}/gone.json`, new RegExp(`localhost:${documents.port} answered 404`)],
      [`${documents.origin}/not-json.json`, /the document is not JSON/],
      [`https://localhost:${untrusted.port}/named.json`, new RegExp(`localhost:${untrusted.port} resolves to a non-public address, which is not fetched`)],
    ];
    for (const [clientId, reason] of cases) {
      const page = await authorizeAs(server, clientId);
      expectRefusedOnPage(page, clientId);
      expect(page.text, clientId).to.match(reason).and.to.include('describes itself in a document this server could not read').and.not.include('has to register');
      expect(page.text, `${clientId}: the address localhost resolved to`).to.not.include('127.0.0.1');
      const token = await postForm(`${server.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: 'x', client_id: clientId });
      const body = await token.json() as { error?: string; error_description?: string };
      expect([token.status, body.error], clientId).to.deep.equal([401, 'invalid_client']);
      expect(body.error_description, clientId).to.match(/^client_id metadata document fetch failed: /).and.match(reason).and.not.include('127.0.0.1');
      expect(body.error_description, `${clientId}: the failure remembered`).to.include('when last asked');
    }
    expect(untrusted.connections(), 'connections to the untrusted listener').to.equal(0);
  });

  it('refuses a client_id that is not a plain https URL without fetching it', async () => {
    const before = documents.connections();
    for (const clientId of [`http://localhost:${documents.port}/good.json`, `https://user@localhost:${documents.port}/good.json`, `https://localhost:${documents.port}/a/../good.json`, `https://localhost:${documents.port}/good.json#x`]) {
      const answer = await authorizeAs(server, clientId);
      expect(answer.status, clientId).to.equal(400);
      expect(answer.location, clientId).to.equal(null);
    }
    expect(documents.connections() - before, 'connections to the document server').to.equal(0);
  });

  it('refuses a client_id URL written any other way than the URL standard writes it, at every endpoint, without fetching it', async () => {
    // Each is a document that would otherwise be fetched: served, and claiming a workspace and client credentials.
    const origin = `localhost:${documents.port}`;
    const variants = [`HTTPS://${origin}/upper.json`, `https://LOCALHOST:${documents.port}/upper.json`, `https://${origin}`, `https://${origin}/a/%2E/upper.json`];
    for (const clientId of variants) {
      documents.serve(URL.parse(clientId)!.pathname, document(clientId, { grant_types: ['client_credentials'], workspace_id: 'ws_someone_elses', token_endpoint_auth_method: 'private_key_jwt' }));
    }
    const before = documents.connections();
    for (const clientId of variants) {
      expectRefusedOnPage(await authorizeAs(server, clientId), clientId);
      const token = await postForm(`${server.issuer}/oauth/token`, { grant_type: 'client_credentials', scope: 'api', client_id: clientId });
      const body = await token.json() as { error?: string };
      expect([token.status, body.error, token.headers.get('www-authenticate')], clientId).to.deep.equal([401, 'invalid_client', 'Basic realm="oauth"']);
    }
    expect(documents.connections() - before, 'connections to the document server').to.equal(0);
    // An IPv4-mapped address written as IPv4 is one such: refused before the address is looked at.
    untrusted.serve('/client.json', document('(any)'));
    expectRefusedOnPage(await authorizeAs(server, `https://[::ffff:127.0.0.1]:${untrusted.port}/client.json`), 'IPv4-mapped, dotted');
    expect(untrusted.connections(), 'connections to the untrusted listener').to.equal(0);
  });

  it('takes a request object signed with a key the document lists (RFC 9101), and refuses one signed with another or a document asking for none', async () => {
    const key = await clientKey();
    const url = publish('/signed-requests.json', { jwks: { keys: [key.publicJwk] }, request_object_signing_alg: 'ES256' });
    const requestAs = async (signer: ClientKey) => {
      const now = Math.floor(Date.now() / 1000);
      const request = await new SignJWT({
        iss: url, aud: server.issuer, client_id: url, response_type: 'code', redirect_uri: REDIRECT, scope: 'api', state: 'signed',
        code_challenge: pkcePair().challenge, code_challenge_method: 'S256', iat: now, exp: now + 300,
      }).setProtectedHeader({ alg: 'ES256', kid: signer.publicJwk.kid! }).sign(signer.privateKey);
      const response = await fetch(authorizationUrl(server.issuer, { client_id: url, request }), { redirect: 'manual' });
      return { status: response.status, location: response.headers.get('location'), text: await response.text() };
    };
    const taken = await requestAs(key);
    expect(taken.status, taken.text.slice(0, 300)).to.be.oneOf([302, 303]);
    expect(taken.location).to.contain('/interaction/');
    const forged = await requestAs(await clientKey());
    expectRefusedOnPage(forged, 'another key');
    expect(forged.text).to.include('invalid_request_object');

    const unsigned = publish('/unsigned-requests.json', { request_object_signing_alg: 'none' });
    expectRefusedOnPage(await authorizeAs(server, unsigned), 'request_object_signing_alg none');
  });

  it('says a document\'s keys belong in the document when it names a jwks_uri', async () => {
    const url = publish('/keys-by-reference.json', { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `${documents.origin}/jwks.json` });
    const answer = await authorizeAs(server, url);
    expectRefusedOnPage(answer, 'jwks_uri');
    expect(answer.text, 'the page says what happened').to.include('Application not accepted');
    await expectLoggedReason(server, url, /jwks_uri is not supported in a client metadata document/);
  });

  describe('limits', () => {
    let limited: TestServer;

    before(async () => {
      limited = await startServer({
        env: { NODE_EXTRA_CA_CERTS: certificates.caFile, CIMD_TRUSTED_HOSTS: `localhost:${documents.port}`, RATE_LIMIT_REGISTRATION: '3/1h', CIMD_ALLOWED_DOMAINS: 'localhost' },
      });
    });

    after(async () => {
      await limited?.stop();
    });

    it('limits new client_id URLs from one address like registrations; a document already fetched is not counted', async () => {
      const known = publish('/limits/known.json', {}, { 'cache-control': 'max-age=3600' });
      expect((await authorizeAs(limited, known)).status).to.be.oneOf([302, 303]);
      for (let i = 0; i < 2; i += 1) await authorizeAs(limited, `${documents.origin}/limits/random-${i}.json`);
      const refused = await authorizeAs(limited, `${documents.origin}/limits/random-9.json`);
      expect(refused.status).to.equal(429);
      expect(refused.text).to.match(/Too many applications this server did not know yet were tried from your network in a short time\. Try again in \d+ (second|minute|hour)s?\./);
      expect(documents.requests('/limits/random-9.json'), 'refused before the fetch').to.equal(0);
      expect((await authorizeAs(limited, known)).status, 'the known document still works').to.be.oneOf([302, 303]);
      expect(documents.requests('/limits/known.json'), 'fetched once').to.equal(1);
    });

    it('with CIMD_ALLOWED_DOMAINS, fetches no document of another domain (and does not count it: nothing was fetched)', async () => {
      const clientId = `https://127.0.0.1:${documents.port}/other-domain.json`;
      const before = documents.connections();
      expectRefusedOnPage(await authorizeAs(limited, clientId), 'another domain');
      expect(documents.connections() - before).to.equal(0);
    });
  });

  describe('new documents at every endpoint that names a client', () => {
    let limited: TestServer;

    beforeEach(async () => {
      limited = await startServer({
        env: { NODE_EXTRA_CA_CERTS: certificates.caFile, CIMD_TRUSTED_HOSTS: `localhost:${documents.port}`, RATE_LIMIT_REGISTRATION: '3/1h' },
      });
    });

    afterEach(async () => {
      await limited?.stop();
    });

    /** Names `clientId` at `endpoint` the way a client would there. */
    async function nameClientAt(endpoint: 'token' | 'par' | 'revoke' | 'introspect' | 'logout' | 'logout with a way back', clientId: string): Promise<Response> {
      if (endpoint === 'logout' || endpoint === 'logout with a way back') {
        const wayBack = endpoint === 'logout' ? '' : `&post_logout_redirect_uri=${encodeURIComponent(REDIRECT)}`;
        return fetch(`${limited.issuer}/oauth/logout?client_id=${encodeURIComponent(clientId)}${wayBack}`, { redirect: 'manual', headers: { accept: 'text/html' } });
      }
      const forms = {
        token: { grant_type: 'client_credentials', scope: 'api' },
        par: { response_type: 'code', redirect_uri: REDIRECT, scope: 'api', code_challenge: pkcePair().challenge, code_challenge_method: 'S256' },
        revoke: { token: 'not-a-token' },
        introspect: { token: 'not-a-token' },
      };
      return postForm(`${limited.issuer}/oauth/${endpoint}`, { ...forms[endpoint], client_id: clientId });
    }

    it('count against the address\'s registration allowance wherever the server would fetch them, not at the authorization endpoint alone', async () => {
      for (const endpoint of ['token', 'par', 'revoke'] as const) {
        await nameClientAt(endpoint, publish(`/every-endpoint/${endpoint}.json`));
        expect(documents.requests(`/every-endpoint/${endpoint}.json`), `fetched at ${endpoint}`).to.equal(1);
      }
      for (const endpoint of ['logout', 'logout with a way back', 'token', 'par', 'revoke'] as const) {
        const path = `/every-endpoint/over/${endpoint.replaceAll(' ', '-')}.json`;
        const refused = await nameClientAt(endpoint, publish(path));
        const text = await refused.text();
        expect(refused.status, `${endpoint}: ${text.slice(0, 300)}`).to.equal(429);
        expect(Number(refused.headers.get('retry-after')), endpoint).to.be.greaterThan(0);
        if (endpoint.startsWith('logout')) expect(text, endpoint).to.match(/Too many applications this server did not know yet/);
        else expect(JSON.parse(text), endpoint).to.include({ error: 'temporarily_unavailable' }).and.have.property('error_description').that.matches(/too many new applications from this address/);
        expect(documents.requests(path), `${endpoint}: refused before the fetch`).to.equal(0);
      }
      const known = await nameClientAt('token', `${documents.origin}/every-endpoint/token.json`);
      expect(known.status, 'a document already fetched counts nothing').to.not.equal(429);
    });

    it('keep nothing of a document that cannot be one (not JSON, another client_id): made-up URLs answering junk do not fill the store', async () => {
      const junk = 'x'.repeat(15_000);
      documents.serve('/junk.txt', (_request, response) => response.end(junk));
      const otherClient = `${documents.origin}/another-client.json`;
      documents.serve('/not-its-own.json', document(otherClient, { client_name: 'y'.repeat(10_000) }));
      for (const path of ['/junk.txt', '/not-its-own.json']) {
        const answer = await nameClientAt('revoke', `${documents.origin}${path}`);
        expect(answer.status, path).to.be.oneOf([400, 401]);
        expect(documents.requests(path), path).to.equal(1);
      }
      const good = publish('/kept.json');
      await nameClientAt('revoke', good);
      const db = new DatabaseSync(limited.store.slice('sqlite:'.length), { readOnly: true });
      try {
        const rows = db.prepare("SELECT payload, expires_at FROM oidc_models WHERE model = 'ClientMetadataDocument'").all() as Array<{ payload: string; expires_at: number }>;
        const now = Math.floor(Date.now() / 1000);
        const kept = rows.filter((row) => row.payload.includes('"body"'));
        expect(kept.map((row) => (JSON.parse(row.payload) as { url: string }).url), 'only the real document is kept').to.deep.equal([good]);
        const marks = rows.filter((row) => !row.payload.includes('"body"'));
        expect(marks, 'a mark that the fetch failed for each of the others').to.have.length(2);
        for (const mark of marks) expect(mark.expires_at, 'kept no longer than a failure is remembered').to.be.at.most(now + 31);
      } finally {
        db.close();
      }
    });
  });

  describe('consent and a document that changes', () => {
    const GOOD = 'https://good.example/cb';
    const ADDED = 'https://added.example/cb';
    let changing: TestServer;

    before(async () => {
      changing = await startServer({ env: { NODE_EXTRA_CA_CERTS: certificates.caFile, CIMD_TRUSTED_HOSTS: `localhost:${documents.port}`, RATE_LIMITS: 'off' } });
    });

    after(async () => {
      await changing?.stop();
    });

    /** An authorization request of the browser `agent`, followed to where it ends: a URL off the server, or its page. */
    async function silently(agent: UserAgent, clientId: string, redirectUri: string): Promise<string> {
      const url = authorizationUrl(changing.issuer, {
        client_id: clientId, response_type: 'code', redirect_uri: redirectUri, scope: 'api', state: 'state-2', prompt: 'none',
        code_challenge: pkcePair().challenge, code_challenge_method: 'S256',
      });
      return (await agent.follow(url, changing.origin)).url;
    }

    /** Makes the stored copy of the document due for a fetch, as time would, and the engine forget the client it built (a restart). */
    async function dueForAFetch(clientId: string): Promise<void> {
      const store = openStore(changing.store);
      try {
        const model = store.model(MetadataDocuments.MODEL);
        const stored = await model.find(digest(clientId)) as { fetchedAt: number };
        await model.upsert(digest(clientId), { ...stored, fetchedAt: stored.fetchedAt - 2 * LIFETIMES.MetadataDocument.minSeconds }, LIFETIMES.MetadataDocument.maxSeconds);
      } finally {
        await store.close();
      }
      await changing.restart();
    }

    it('does not let earlier consent reach a redirect URI a new version of the document adds: prompt=none gets no code there, and still one at the URI consented to', async () => {
      const clientId = publish('/changing.json', { redirect_uris: [GOOD] });
      const user = await seedUser(changing);
      const agent = new UserAgent();
      const consented = await authorize(agent, authorizationUrl(changing.issuer, {
        client_id: clientId, response_type: 'code', redirect_uri: GOOD, scope: 'api', state: 'state-1',
        code_challenge: pkcePair().challenge, code_challenge_method: 'S256',
      }), changing.origin, { email: user.email, password: user.password });
      expect(consented.searchParams.get('code'), consented.href).to.be.a('string');
      expect(new URL(await silently(agent, clientId, GOOD)).searchParams.get('code'), 'silent renewal at the URI consented to').to.be.a('string');

      publish('/changing.json', { redirect_uris: [GOOD, ADDED] });
      await dueForAFetch(clientId);
      const added = await silently(agent, clientId, ADDED);
      expect(added, 'no code goes to the added URI without consent').not.to.match(/[?&]code=/);
      expect(new URL(await silently(agent, clientId, GOOD)).searchParams.get('code'), 'the URI consented to is still covered').to.be.a('string');
    });
  });

  describe('with CIMD=off', () => {
    let off: TestServer;

    before(async () => {
      off = await startServer({ env: { NODE_EXTRA_CA_CERTS: certificates.caFile, CIMD_TRUSTED_HOSTS: `localhost:${documents.port}`, CIMD: 'off' } });
    });

    after(async () => {
      await off?.stop();
    });

    it('does not advertise the feature and fetches nothing', async () => {
      const metadata = await (await fetch(`${off.issuer}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>;
      expect(metadata).to.not.have.property('client_id_metadata_document_supported');
      const before = documents.connections();
      const answer = await authorizeAs(off, publish('/off.json'));
      expect(answer.status).to.equal(400);
      expect(documents.connections() - before).to.equal(0);
    });
  });
});
