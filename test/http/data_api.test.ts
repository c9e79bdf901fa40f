import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

import { expect } from 'chai';
import { generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';

import { api, clientCredentialsToken, createApiKey, memberOf, userAccessToken, type ApiResponse } from '../support/data_api.ts';
import { postCredentials, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { privateJwk } from '../support/keys.ts';

/**
 * The data APIs (Core under /rest/, Metadata under /rest/metadata/) as the protected resource:
 * every rule through HTTP against the real server, with credentials from the real flows
 * (authorization code for users of each role, client credentials, API keys from the admin CLI).
 */

interface Company {
  id: string;
  name: string;
  employees: number | null;
  [field: string]: unknown;
}

interface ErrorBody {
  error: string;
  error_description: string;
}

type ListBody<K extends string, T> = { data: Record<K, T[]>; pageInfo: { hasNextPage: boolean; startCursor: string | null; endCursor: string | null }; totalCount: number };

describe('data API', function () {
  this.timeout(60_000);

  let dir: string;
  let server: TestServer;
  /** The service's own signing key (given as JWKS_FILE), to make tokens that differ from a good one in one claim. */
  let signingKey: JWK;
  let client: RegisteredClient;
  /** Workspace A: an admin, a member, a viewer; workspace B: an admin. */
  let adminA: SeededUser;
  let memberA: SeededUser;
  let viewerA: SeededUser;
  let adminB: SeededUser;
  let wsA: string;
  let wsB: string;
  const tokens: Record<string, string> = {};

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'data-api-'));
    signingKey = await privateJwk('ES256');
    await writeFile(join(dir, 'jwks.json'), JSON.stringify({ keys: [signingKey, await privateJwk('RS256')] }));
    server = await startServer({ env: { JWKS_FILE: join(dir, 'jwks.json') } });
    client = await registerClient(server.issuer);
    adminA = await seedUser(server, [{ workspace: 'Workspace A', role: 'admin' }]);
    wsA = adminA.workspaces[0]!.id;
    adminB = await seedUser(server, [{ workspace: 'Workspace B', role: 'admin' }]);
    wsB = adminB.workspaces[0]!.id;
    memberA = await memberOf(server, wsA, 'member');
    viewerA = await memberOf(server, wsA, 'viewer');

    tokens.adminA = (await userAccessToken(server, client, adminA)).access_token;
    tokens.memberA = (await userAccessToken(server, client, memberA)).access_token;
    tokens.viewerA = (await userAccessToken(server, client, viewerA)).access_token;
    tokens.adminB = (await userAccessToken(server, client, adminB)).access_token;
    tokens.clientA = (await clientCredentialsToken(server, wsA)).access_token;
    tokens.clientB = (await clientCredentialsToken(server, wsB)).access_token;
    tokens.keyA = (await createApiKey(server, wsA)).key;
    tokens.keyB = (await createApiKey(server, wsB)).key;
  });

  after(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const createCompany = async (credential: string, name = 'Acme') => {
    const response = await api<{ data: { company: Company } }>(server, '/rest/companies', { credential, json: { name, employees: 10 } });
    expect(response.status, JSON.stringify(response.body)).to.equal(201);
    return response.body.data.company;
  };

  /** A token signed with the service's key, with the claims a good one has, changed by `overrides`. */
  async function forgedToken(overrides: Record<string, unknown>, header: Record<string, string> = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      iss: server.issuer, aud: `${server.issuer}/rest`, sub: client.client_id, client_id: client.client_id,
      jti: `forged-${Math.random()}`, iat: now, exp: now + 600, scope: 'api', workspace_id: wsA, ...overrides,
    };
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: signingKey.kid!, ...header })
      .sign(await importJWK(signingKey, 'ES256'));
  }

  describe('authentication (RFC 6750, RFC 9728)', () => {
    it('asks for a credential with 401 and names the protected resource metadata', async () => {
      const response = await api<ErrorBody>(server, '/rest/companies');
      expect(response.status).to.equal(401);
      const challenge = response.headers.get('www-authenticate')!;
      expect(challenge).to.match(/^Bearer /);
      expect(challenge).to.include(`resource_metadata="${server.origin}/.well-known/oauth-protected-resource/rest"`);
      // RFC 6750 section 3.1: no error code when the request carried no credential.
      expect(challenge).to.not.include('error=');
      expect(response.body.error_description).to.match(/access token or an API key/);
      // An unknown object is not revealed to an anonymous caller either.
      expect((await api(server, '/rest/secrets')).status).to.equal(401);
      expect((await api(server, '/rest/metadata/objects')).status).to.equal(401);
    });

    it('answers a malformed Authorization header with 400 invalid_request, and another scheme as no credential (RFC 6750 section 3.1)', async () => {
      const good = Object.values(tokens)[0]!;
      for (const authorization of ['Bearer', 'Bearer ', `Bearer ${good} ${good}`, 'Bearer tok!en', 'DPoP a b']) {
        const response = await api<ErrorBody>(server, '/rest/companies', { headers: { authorization } });
        expect([response.status, response.body.error], authorization).to.deep.equal([400, 'invalid_request']);
        expect(response.headers.get('www-authenticate'), authorization).to.include('error="invalid_request"');
      }
      for (const authorization of ['Basic dXNlcjpwYXNz', 'Bearertoken', 'Token abc']) {
        const response = await api<ErrorBody>(server, '/rest/companies', { headers: { authorization } });
        expect(response.status, authorization).to.equal(401);
        expect(response.headers.get('www-authenticate'), authorization).to.not.include('error=');
      }
      const userinfo = await fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: 'Bearer a b' } });
      expect(userinfo.status, 'userinfo').to.equal(400);
    });

    it('refuses a request with two Authorization headers with 400 invalid_request, whichever comes first, at the data API (whose authentication /mcp shares), userinfo and every engine endpoint that reads one', async () => {
      /** Two header lines, as written (fetch would join them into one). */
      const twoHeaders = (path: string, values: string[], method = 'GET') => new Promise<{ status: number; body: ErrorBody }>((resolve, reject) => {
        const sent = request(`${server.origin}${path}`, { method, headers: ['Host', new URL(server.origin).host, ...values.flatMap((value) => ['Authorization', value]), 'Content-Type', 'application/x-www-form-urlencoded'] }, (answer) => {
          let text = '';
          answer.on('data', (chunk: Buffer) => { text += chunk.toString('utf8'); });
          answer.on('end', () => { try { resolve({ status: answer.statusCode ?? 0, body: JSON.parse(text) as ErrorBody }); } catch { reject(new Error(`${answer.statusCode} ${path}: ${text}`)); } });
        });
        sent.on('error', reject);
        sent.end(method === 'POST' ? 'grant_type=client_credentials&token=x' : undefined);
      });
      for (const values of [[`Bearer ${tokens.keyB}`, `Bearer ${tokens.keyA}`], [`Bearer ${tokens.keyA}`, 'Bearer not-a-credential']]) {
        for (const path of ['/rest/companies', '/oauth/userinfo']) {
          const answer = await twoHeaders(path, values);
          expect([answer.status, answer.body.error], path).to.deep.equal([400, 'invalid_request']);
          expect(answer.body.error_description).to.contain('send one Authorization header');
        }
      }
      const basic = `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret!)}`).toString('base64')}`;
      for (const path of ['/oauth/token', '/oauth/introspect', '/oauth/revoke']) {
        const answer = await twoHeaders(path, [basic, basic], 'POST');
        expect([answer.status, answer.body.error], path).to.deep.equal([400, 'invalid_request']);
      }
      expect((await twoHeaders(`/oauth/register/${client.client_id}`, ['Bearer a', 'Bearer b'])).status, 'client management').to.equal(400);
    });

    it('accepts a good token of every kind, and a token built from a good one to fit the check it fails never', async () => {
      for (const credential of Object.values(tokens)) expect((await api(server, '/rest/companies', { credential })).status).to.equal(200);
      expect((await api(server, '/rest/companies', { credential: await forgedToken({}) })).status, 'control: a forged token that differs in nothing').to.equal(200);

      const now = Math.floor(Date.now() / 1000);
      const { privateKey: strangerKey } = await generateKeyPair('ES256');
      const bad: Record<string, string> = {
        expired: await forgedToken({ iat: now - 7200, exp: now - 3600 }),
        'another audience': await forgedToken({ aud: 'https://elsewhere.example/api' }),
        'another issuer': await forgedToken({ iss: 'https://evil.example' }),
        'an ID token (typ JWT)': await forgedToken({}, { typ: 'JWT' }),
        'signed by another key': await new SignJWT({ iss: server.issuer, aud: `${server.issuer}/rest`, sub: 'x', client_id: 'x', jti: 'x', scope: 'api', workspace_id: wsA })
          .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: signingKey.kid! }).setIssuedAt().setExpirationTime('10m').sign(strangerKey),
        garbage: 'not-a-token',
      };
      for (const [what, credential] of Object.entries(bad)) {
        const response = await api<ErrorBody>(server, '/rest/companies', { credential });
        expect(response.status, what).to.equal(401);
        expect(response.body.error, what).to.equal('invalid_token');
        expect(response.headers.get('www-authenticate'), what).to.match(/error="invalid_token"/).and.include('resource_metadata=');
      }
    });

    it('refuses a token without the api scope with 403 insufficient_scope naming the scope', async () => {
      const profileOnly = (await userAccessToken(server, client, adminA, 'profile')).access_token;
      const response = await api<ErrorBody>(server, '/rest/companies', { credential: profileOnly });
      expect(response.status).to.equal(403);
      expect(response.body.error).to.equal('insufficient_scope');
      expect(response.headers.get('www-authenticate')).to.match(/error="insufficient_scope"/).and.match(/scope="api"/);
    });

    it('refuses at once every token of a grant revoked by its client (RFC 7009 on the refresh token)', async () => {
      const { access_token: accessToken, refresh_token: refreshToken } = await userAccessToken(server, client, memberA);
      expect((await api(server, '/rest/companies', { credential: accessToken })).status).to.equal(200);
      const revoked = await fetch(`${server.issuer}/oauth/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: refreshToken!, ...postCredentials(client) }),
      });
      expect(revoked.status).to.equal(200);
      const response = await api<ErrorBody>(server, '/rest/companies', { credential: accessToken });
      expect(response.status).to.equal(401);
      expect(response.body.error).to.equal('invalid_token');
    });

    it('refuses at once the tokens of a client deleted through RFC 7592, user-bound and client-credentials alike', async () => {
      const doomed = await registerClient(server.issuer);
      const userToken = (await userAccessToken(server, doomed, memberA)).access_token;
      const machine = await clientCredentialsToken(server, wsA);
      for (const credential of [userToken, machine.access_token]) expect((await api(server, '/rest/companies', { credential })).status).to.equal(200);
      for (const gone of [doomed, machine.client]) {
        const deleted = await fetch(gone.registration_client_uri, { method: 'DELETE', headers: { authorization: `Bearer ${gone.registration_access_token}` } });
        expect(deleted.status).to.equal(204);
      }
      for (const credential of [userToken, machine.access_token]) expect((await api(server, '/rest/companies', { credential })).status).to.equal(401);
    });

    it('follows a demotion within the propagation bound, whatever role the token was issued with', async () => {
      const user = await memberOf(server, wsA, 'member');
      const { access_token: credential } = await userAccessToken(server, client, user);
      await createCompany(credential, 'Before demotion');
      const demoted = await server.admin(['member', 'add', '--user', user.id, '--workspace', wsA, '--role', 'viewer']);
      expect(demoted.code).to.equal(0);
      await new Promise((resolve) => setTimeout(resolve, 2100));
      const write = await api<ErrorBody>(server, '/rest/companies', { credential, json: { name: 'After demotion' } });
      expect(write.status).to.equal(403);
      expect(write.body.error).to.equal('insufficient_role');
      expect((await api(server, '/rest/companies', { credential })).status).to.equal(200);
    });
  });

  describe('roles', () => {
    it('lets a viewer read but not create, change or delete (403), a member and an admin do all, and so do workspace-level credentials', async () => {
      const record = await createCompany(tokens.adminA!);
      for (const who of ['viewerA', 'memberA', 'adminA', 'clientA', 'keyA']) {
        expect((await api(server, '/rest/companies', { credential: tokens[who] })).status, `${who} lists`).to.equal(200);
        expect((await api(server, `/rest/companies/${record.id}`, { credential: tokens[who] })).status, `${who} reads`).to.equal(200);
      }
      const viewer = tokens.viewerA!;
      const refusals = [
        await api<ErrorBody>(server, '/rest/companies', { credential: viewer, json: { name: 'Nope' } }),
        await api<ErrorBody>(server, `/rest/companies/${record.id}`, { method: 'PATCH', credential: viewer, json: { name: 'Nope' } }),
        await api<ErrorBody>(server, `/rest/companies/${record.id}`, { method: 'DELETE', credential: viewer }),
      ];
      for (const refusal of refusals) {
        expect(refusal.status).to.equal(403);
        expect(refusal.body.error).to.equal('insufficient_role');
        expect(refusal.body.error_description).to.match(/viewer/);
      }
      expect((await api<{ data: { company: Company } }>(server, `/rest/companies/${record.id}`, { credential: viewer })).body.data.company.name).to.equal('Acme');

      for (const who of ['memberA', 'adminA', 'clientA', 'keyA']) {
        const own = await createCompany(tokens[who]!, `by ${who}`);
        const changed = await api<{ data: { company: Company } }>(server, `/rest/companies/${own.id}`, { method: 'PATCH', credential: tokens[who], json: { employees: 42 } });
        expect(changed.status, `${who} changes`).to.equal(200);
        expect(changed.body.data.company).to.include({ name: `by ${who}`, employees: 42 });
        expect((await api(server, `/rest/companies/${own.id}`, { method: 'DELETE', credential: tokens[who] })).status, `${who} deletes`).to.equal(200);
        expect((await api(server, `/rest/companies/${own.id}`, { credential: tokens[who] })).status, `${who}: gone`).to.equal(404);
      }
    });

    it('refuses a viewer\'s change for its role (403), not for an If-Match it sends: a condition counts only for a request that could succeed', async () => {
      const record = await createCompany(tokens.adminA!);
      const refused = await api<ErrorBody>(server, `/rest/companies/${record.id}`, { method: 'PATCH', credential: tokens.viewerA, json: { name: 'Nope' }, headers: { 'if-match': '"v1"' } });
      expect([refused.status, refused.body.error]).to.deep.equal([403, 'insufficient_role']);
    });

    it('lets everyone read the Metadata API and no one write it (it is read-only: 405)', async () => {
      for (const who of ['viewerA', 'adminA', 'keyA']) {
        const response = await api(server, '/rest/metadata/objects', { credential: tokens[who] });
        expect(response.status).to.equal(200);
      }
      for (const who of ['adminA', 'clientA', 'keyA']) {
        const response = await api<ErrorBody>(server, '/rest/metadata/objects', { credential: tokens[who], json: { namePlural: 'deals' } });
        expect(response.status, who).to.equal(405);
        expect(response.headers.get('allow')).to.equal('GET, HEAD');
      }
    });
  });

  describe('workspace isolation', () => {
    it('never lets a credential of another workspace read, list, change or delete a record, even knowing its id', async () => {
      const secret = await createCompany(tokens.adminA!, 'Workspace A secret');
      const person = await api<{ data: { person: { id: string } } }>(server, '/rest/people', { credential: tokens.keyA, json: { firstName: 'Ann', companyId: secret.id } });
      expect(person.status).to.equal(201);
      const listA = await api<ListBody<'companies', Company>>(server, '/rest/companies?limit=1', { credential: tokens.adminA });

      for (const who of ['adminB', 'clientB', 'keyB']) {
        const credential = tokens[who];
        for (const [method, path, json] of [
          ['GET', `/rest/companies/${secret.id}`, undefined],
          ['PATCH', `/rest/companies/${secret.id}`, { name: 'Stolen' }],
          ['DELETE', `/rest/companies/${secret.id}`, undefined],
          ['GET', `/rest/people/${person.body.data.person.id}`, undefined],
          ['DELETE', `/rest/people/${person.body.data.person.id}`, undefined],
        ] as const) {
          const response = await api<ErrorBody>(server, path, { method, credential, ...(json ? { json } : {}) });
          expect(response.status, `${who} ${method} ${path}`).to.equal(404);
          expect(response.body.error).to.equal('not_found');
        }
        // Linking to another workspace's record is refused as if it did not exist.
        const link = await api<ErrorBody>(server, '/rest/people', { credential, json: { firstName: 'Mallory', companyId: secret.id } });
        expect(link.status, who).to.equal(400);
        expect(link.body.error_description).to.match(/companyId: no company/);
        // Its own list shows none of A's records; A's cursor is no cursor of its list.
        const list = await api<ListBody<'companies', Company>>(server, '/rest/companies', { credential });
        expect(list.status, `${who} list`).to.equal(200);
        expect(list.body.data.companies.map((c) => c.name)).to.not.include('Workspace A secret');
        const fromCursor = await api<ErrorBody>(server, `/rest/companies?starting_after=${listA.body.pageInfo.endCursor}`, { credential });
        expect([fromCursor.status, fromCursor.body.error], `${who} list from A's cursor`).to.deep.equal([400, 'invalid_request']);
        expect(fromCursor.body.error_description).to.match(/starting_after is not a cursor of this list/);
      }
      const after = await api<{ data: { company: Company } }>(server, `/rest/companies/${secret.id}`, { credential: tokens.adminA });
      expect(after.body.data.company).to.deep.equal(secret);
    });
  });

  describe('Core API', () => {
    let keyC: string;

    before(async () => {
      const owner = await seedUser(server, [{ workspace: 'Workspace C', role: 'admin' }]);
      keyC = (await createApiKey(server, owner.workspaces[0]!.id)).key;
    });

    it('creates a record with its id, times and every field (null when unset), and answers 201 with its location', async () => {
      const response = await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Globex', domainName: 'globex.com', idealCustomerProfile: true } });
      expect(response.status).to.equal(201);
      const company = response.body.data.company;
      expect(company.id).to.match(/^[0-9a-f-]{36}$/);
      expect(response.headers.get('location')).to.equal(`/rest/companies/${company.id}`);
      expect(company).to.deep.equal({
        id: company.id, createdAt: company.createdAt, updatedAt: company.createdAt,
        name: 'Globex', domainName: 'globex.com', employees: null, city: null, idealCustomerProfile: true,
      });
      expect(Date.parse(company.createdAt as string)).to.be.closeTo(Date.now(), 60_000);
      const read = await api<{ data: { company: Company } }>(server, `/rest/companies/${company.id}`, { credential: keyC });
      expect(read.body.data.company).to.deep.equal(company);
    });

    it('changes only the fields a PATCH names, clears a field set to null, and moves updatedAt', async () => {
      const company = (await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Initech', city: 'Austin', employees: 5 } })).body.data.company;
      await new Promise((resolve) => setTimeout(resolve, 5));
      const response = await api<{ data: { company: Company } }>(server, `/rest/companies/${company.id}`, { method: 'PATCH', credential: keyC, json: { employees: 6, city: null } });
      expect(response.status).to.equal(200);
      expect(response.body.data.company).to.include({ name: 'Initech', city: null, employees: 6, createdAt: company.createdAt });
      expect(Date.parse(response.body.data.company.updatedAt as string)).to.be.greaterThan(Date.parse(company.updatedAt as string));
    });

    it('answers a read conditional on an entity tag with 412, and one with If-None-Match: * with 304, for a record that is there (RFC 9110 section 13.2.2); a missing record is still 404', async () => {
      const company = (await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Read Conditionally' } })).body.data.company;
      const path = `/rest/companies/${company.id}`;
      const tagged = await api<ErrorBody>(server, path, { credential: keyC, headers: { 'if-match': '"v1"' } });
      expect([tagged.status, tagged.body.error]).to.deep.equal([412, 'precondition_failed']);
      const any = await api<{ data: { company: Company } }>(server, path, { credential: keyC, headers: { 'if-match': '*' } });
      expect([any.status, any.body.data.company]).to.deep.equal([200, company]);
      const notModified = await fetch(`${server.issuer}${path}`, { headers: { authorization: `Bearer ${keyC}`, 'if-none-match': '*' } });
      expect([notModified.status, await notModified.text()]).to.deep.equal([304, '']);
      const tagNamed = await api<{ data: { company: Company } }>(server, path, { credential: keyC, headers: { 'if-none-match': '"v1"' } });
      expect(tagNamed.status, 'If-None-Match naming a tag holds: served').to.equal(200);
      const missing = await api(server, `/rest/companies/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`, { credential: keyC, headers: { 'if-match': '"v1"' } });
      expect(missing.status).to.equal(404);
    });

    it('refuses a PATCH or DELETE conditional on an entity tag with 412, changing nothing, as records carry none (RFC 9110 section 13.1.1); If-Match: * is served', async () => {
      const company = (await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Conditional', employees: 1 } })).body.data.company;
      const path = `/rest/companies/${company.id}`;
      const tagged = { 'if-match': '"v1"' };
      const patched = await api<ErrorBody>(server, path, { method: 'PATCH', credential: keyC, json: { employees: 2 }, headers: tagged });
      expect([patched.status, patched.body.error]).to.deep.equal([412, 'precondition_failed']);
      const deleted = await api<ErrorBody>(server, path, { method: 'DELETE', credential: keyC, headers: { 'if-match': 'W/"x", "y"' } });
      expect(deleted.status).to.equal(412);
      expect((await api<{ data: { company: Company } }>(server, path, { credential: keyC })).body.data.company, 'unchanged, not deleted').to.deep.equal(company);

      const missing = `/rest/companies/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`;
      expect((await api(server, missing, { method: 'PATCH', credential: keyC, json: { employees: 2 }, headers: tagged })).status, 'no such record').to.equal(404);
      const other = await seedUser(server, [{ workspace: 'Conditional Elsewhere', role: 'admin' }]);
      const otherKey = (await createApiKey(server, other.workspaces[0]!.id)).key;
      expect((await api(server, path, { method: 'PATCH', credential: otherKey, json: { employees: 2 }, headers: tagged })).status, 'another workspace\'s record').to.equal(404);

      const any = await api<{ data: { company: Company } }>(server, path, { method: 'PATCH', credential: keyC, json: { employees: 3 }, headers: { 'if-match': '*' } });
      expect(any.status).to.equal(200);
      expect(any.body.data.company.employees).to.equal(3);
    });

    it('refuses a PATCH or DELETE with If-None-Match: * on a record that exists with 412, changing nothing (RFC 9110 section 13.1.2); one naming a tag is served', async () => {
      const company = (await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Absent Only', employees: 1 } })).body.data.company;
      const path = `/rest/companies/${company.id}`;
      const absentOnly = { 'if-none-match': '*' };
      const patched = await api<ErrorBody>(server, path, { method: 'PATCH', credential: keyC, json: { employees: 2 }, headers: absentOnly });
      expect([patched.status, patched.body.error]).to.deep.equal([412, 'precondition_failed']);
      expect((await api(server, path, { method: 'DELETE', credential: keyC, headers: absentOnly })).status).to.equal(412);
      expect((await api<{ data: { company: Company } }>(server, path, { credential: keyC })).body.data.company, 'unchanged, not deleted').to.deep.equal(company);
      const missing = `/rest/companies/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`;
      expect((await api(server, missing, { method: 'DELETE', credential: keyC, headers: absentOnly })).status, 'no such record').to.equal(404);

      const untagged = await api<{ data: { company: Company } }>(server, path, { method: 'PATCH', credential: keyC, json: { employees: 3 }, headers: { 'if-none-match': '"v1"' } });
      expect(untagged.status).to.equal(200);
      expect(untagged.body.data.company.employees).to.equal(3);
    });

    it('pages through a list with limit and starting_after, with totalCount and hasNextPage', async () => {
      const owner = await seedUser(server, [{ workspace: 'Workspace D', role: 'admin' }]);
      const key = (await createApiKey(server, owner.workspaces[0]!.id)).key;
      for (let i = 1; i <= 5; i += 1) await api(server, '/rest/companies', { credential: key, json: { name: `Company ${i}` } });
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      for (;;) {
        const query: string = `?limit=2${cursor ? `&starting_after=${cursor}` : ''}`;
        const page: ApiResponse<ListBody<'companies', Company>> = await api<ListBody<'companies', Company>>(server, `/rest/companies${query}`, { credential: key });
        expect(page.status).to.equal(200);
        expect(page.body.totalCount).to.equal(5);
        seen.push(...page.body.data.companies.map((c) => c.name));
        pages += 1;
        if (!page.body.pageInfo.hasNextPage) break;
        cursor = page.body.pageInfo.endCursor;
      }
      expect(pages).to.equal(3);
      expect(seen).to.deep.equal(['Company 1', 'Company 2', 'Company 3', 'Company 4', 'Company 5']);
      const empty = await api<ListBody<'people', unknown>>(server, '/rest/people', { credential: key });
      expect(empty.body).to.deep.equal({ data: { people: [] }, pageInfo: { hasNextPage: false, startCursor: null, endCursor: null }, totalCount: 0 });
    });

    it('links a person to a company of the workspace, and shows the link as null once the company is deleted', async () => {
      const company = (await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Hooli' } })).body.data.company;
      const created = await api<{ data: { person: Record<string, unknown> } }>(server, '/rest/people', { credential: keyC, json: { firstName: 'Gavin', lastName: 'Belson', email: 'gavin@hooli.example', companyId: company.id } });
      expect(created.status).to.equal(201);
      const person = created.body.data.person;
      expect(person).to.include({ firstName: 'Gavin', companyId: company.id, email: 'gavin@hooli.example' });
      expect((await api(server, `/rest/companies/${company.id}`, { method: 'DELETE', credential: keyC })).status).to.equal(200);
      const read = await api<{ data: { person: Record<string, unknown> } }>(server, `/rest/people/${person.id as string}`, { credential: keyC });
      expect(read.body.data.person.companyId).to.equal(null);
      const listed = await api<ListBody<'people', Record<string, unknown>>>(server, '/rest/people', { credential: keyC });
      expect(listed.body.data.people.find((p) => p.id === person.id)?.companyId).to.equal(null);
    });

    it('answers bad input with a 4xx JSON error that says what is wrong, never a 5xx', async () => {
      const company = (await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Target' } })).body.data.company;
      const cases: Array<[string, string, Parameters<typeof api>[2], number, string, RegExp]> = [
        ['unknown object', '/rest/deals', {}, 404, 'not_found', /no object named deals.*companies, people/],
        ['unknown record', '/rest/companies/00000000-0000-4000-8000-000000000000', {}, 404, 'not_found', /no company/],
        ['an id that is no id', '/rest/companies/not-an-id', {}, 404, 'not_found', /no company with id not-an-id/],
        ['malformed JSON', '/rest/companies', { raw: '{"name": "Acme",' }, 400, 'invalid_request', /not a valid JSON object/],
        ['a JSON array', '/rest/companies', { raw: '[{"name": "Acme"}]' }, 400, 'invalid_request', /JSON object/],
        ['a JSON string', '/rest/companies', { raw: '"Acme"' }, 400, 'invalid_request', /JSON object/],
        ['wrong types', '/rest/companies', { json: { name: 7, employees: 'many', idealCustomerProfile: 'yes' } }, 400, 'invalid_request', /name: must be a string; employees: must be a number; idealCustomerProfile: must be true or false/],
        ['a fraction where a whole number goes', '/rest/companies', { json: { name: 'X', employees: 1.5 } }, 400, 'invalid_request', /employees: must be a whole number/],
        ['a negative count', '/rest/companies', { json: { name: 'X', employees: -1 } }, 400, 'invalid_request', /at least 0/],
        ['an unknown field', '/rest/companies', { json: { name: 'X', revenue: 1 } }, 400, 'invalid_request', /revenue: no such field/],
        ['a read-only field', '/rest/companies', { json: { name: 'X', id: company.id } }, 400, 'invalid_request', /id: set by the server/],
        ['a missing required field', '/rest/people', { json: { lastName: 'Only' } }, 400, 'invalid_request', /firstName: required/],
        ['a bad email', '/rest/people', { json: { firstName: 'A', email: 'not-an-email' } }, 400, 'invalid_request', /email: must be an email/],
        ['a relation that is no id', '/rest/people', { json: { firstName: 'A', companyId: 'acme' } }, 400, 'invalid_request', /companyId: must be the id/],
        ['a text too long', '/rest/companies', { json: { name: 'x'.repeat(201) } }, 400, 'invalid_request', /at most 200/],
        ['half of a surrogate pair, which no JSON parser reads back', '/rest/companies', { raw: '{"name":"Acme \\ud800"}' }, 400, 'invalid_request', /name: must be text: it holds half of a surrogate pair/],
        ['a count past what a number holds exactly', '/rest/companies', { json: { name: 'X', employees: 2 ** 53 } }, 400, 'invalid_request', /employees: must be at most 9007199254740991/],
        ['a body its Content-Encoding does not match', '/rest/companies', { raw: '{"name":"Acme"}', headers: { 'content-encoding': 'gzip' } }, 400, 'invalid_request', /not a valid JSON object/],
        ['an oversized body', '/rest/companies', { raw: JSON.stringify({ name: 'x'.repeat(70_000) }) }, 413, 'payload_too_large', /larger than/],
        ['not JSON', '/rest/companies', { raw: 'name=Acme', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, 'unsupported_media_type', /JSON/],
        ['an empty body', '/rest/companies', { method: 'POST', raw: '' }, 400, 'invalid_request', /the body is empty/],
        ['a body of spaces', '/rest/companies', { method: 'POST', raw: '  \n ' }, 400, 'invalid_request', /not a valid JSON object/],
        ['no body at all, said to be JSON', '/rest/companies', { method: 'POST', headers: { 'content-type': 'application/json' } }, 400, 'invalid_request', /the body is empty/],
        ['a __proto__ member (valid JSON)', '/rest/companies', { raw: '{"__proto__":{"x":1},"name":"a"}' }, 400, 'invalid_request', /^__proto__: no object has such a field$/],
        ['a required field set to null', `/rest/companies/${company.id}`, { method: 'PATCH', json: { name: null } }, 400, 'invalid_request', /name: required, cannot be null/],
        ['an empty PATCH', `/rest/companies/${company.id}`, { method: 'PATCH', json: {} }, 400, 'invalid_request', /at least one field/],
        ['a bad cursor', '/rest/companies?starting_after=bm90LWEtY3Vyc29y', {}, 400, 'invalid_request', /starting_after/],
        ['another list\'s cursor', `/rest/people?starting_after=${Buffer.from('companies:1').toString('base64url')}`, {}, 400, 'invalid_request', /starting_after/],
        ['a limit too large', '/rest/companies?limit=1000', {}, 400, 'invalid_request', /limit must be a whole number from 1 to 100/],
        ['a limit that is no number', '/rest/companies?limit=ten', {}, 400, 'invalid_request', /limit/],
        ['an unsupported method', '/rest/companies', { method: 'PUT', json: { name: 'X' } }, 405, 'method_not_allowed', /./],
        ['an unknown path', '/rest/companies/x/y', {}, 404, 'not_found', /./],
      ];
      for (const [what, path, request, status, error, description] of cases) {
        const response = await api<ErrorBody>(server, path, { credential: keyC, ...request });
        expect(response.status, what).to.equal(status);
        expect(response.body.error, what).to.equal(error);
        expect(response.body.error_description, what).to.match(description);
      }
      // Nothing was half-written by any of them.
      const unchanged = await api<{ data: { company: Company } }>(server, `/rest/companies/${company.id}`, { credential: keyC });
      expect(unchanged.body.data.company).to.deep.equal(company);
      expect(server.logs()).to.not.match(/"status":5\d\d/);
    });

    it('refuses a body in a content coding it does not decode with 415 saying so, and Accept-Encoding naming those it does (RFC 9110 section 15.5.16)', async () => {
      const response = await api<ErrorBody>(server, '/rest/companies', { credential: keyC, raw: '{"name":"Acme"}', headers: { 'content-encoding': 'compress' } });
      expect([response.status, response.body.error]).to.deep.equal([415, 'unsupported_media_type']);
      expect(response.body.error_description).to.match(/content coding this API does not read; send it unencoded, or in gzip, deflate, br/);
      expect(response.headers.get('accept-encoding')).to.equal('gzip, deflate, br');
    });

    it('refuses a body that is not UTF-8 (RFC 8259 section 8.1) with 400 rather than storing U+FFFD in place of its bytes, whatever charset it names', async () => {
      const latin1 = Buffer.concat([Buffer.from('{"name":"Caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
      for (const type of ['application/json', 'application/json; charset=iso-8859-1']) {
        const refused = await api<ErrorBody>(server, '/rest/companies', { credential: keyC, raw: latin1, headers: { 'content-type': type } });
        expect([refused.status, refused.body.error], type).to.deep.equal([400, 'invalid_request']);
        expect(refused.body.error_description).to.match(/not UTF-8/);
      }
      const listed = await api<{ data: { companies: Company[] } }>(server, '/rest/companies?limit=100', { credential: keyC });
      expect(listed.body.data.companies.map((company) => company.name), 'nothing stored').not.to.include('Caf\uFFFD');
      // The same text in UTF-8, with the byte order mark RFC 8259 lets a parser ignore, and a real U+FFFD, are kept as sent.
      const utf8 = await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, raw: Buffer.from('\uFEFF{"name":"Café \uFFFD"}') });
      expect(utf8.status).to.equal(201);
      expect(utf8.body.data.company.name).to.equal('Café \uFFFD');
    });

    it('refuses a list request that asks to filter or sort, which a list does not do, rather than answering every record as if it had', async () => {
      for (const query of ['filter=name%5Beq%5D%3AAcme', 'order_by=name', 'sort=name', 'ending_before=x', 'LIMIT=1', 'limit=5&filter=x']) {
        const refused = await api<ErrorBody>(server, `/rest/companies?${query}`, { credential: keyC });
        expect([refused.status, refused.body.error], query).to.deep.equal([400, 'invalid_request']);
        expect(refused.body.error_description, query).to.match(/a list takes only limit and starting_after; it is neither filtered nor sorted/);
      }
      await createCompany(keyC, 'Listed');
      await createCompany(keyC, 'Listed too');
      const page = await api<ListBody<'companies', Company>>(server, '/rest/companies?limit=1', { credential: keyC });
      expect(page.status).to.equal(200);
      const next = await api<ListBody<'companies', Company>>(server, `/rest/companies?limit=1&starting_after=${page.body.pageInfo.endCursor}`, { credential: keyC });
      expect(next.status, 'the parameters a list takes still work').to.equal(200);
    });

    it('refuses query parameters on a request that takes none (a create, a read, an update, a delete, the Metadata API), changing nothing, rather than doing it as if they were not there', async () => {
      const company = await createCompany(keyC, 'Not Dry');
      const attempts: Array<[string, string, Record<string, unknown> | undefined]> = [
        ['POST', '/rest/companies?upsert=true', { name: 'Upserted' }],
        ['GET', `/rest/companies/${company.id}?fields=name`, undefined],
        ['PATCH', `/rest/companies/${company.id}?dryRun=true`, { city: 'Dry Run' }],
        ['DELETE', `/rest/companies/${company.id}?dryRun=true`, undefined],
        ['GET', '/rest/metadata/objects?limit=1', undefined],
        ['GET', '/rest/metadata/objects/companies?expand=fields', undefined],
      ];
      for (const [method, path, json] of attempts) {
        const refused = await api<ErrorBody>(server, path, { credential: keyC, method, ...(json ? { json } : {}) });
        expect([refused.status, refused.body.error], `${method} ${path}`).to.deep.equal([400, 'invalid_request']);
        expect(refused.body.error_description, `${method} ${path}`).to.match(/this request takes no query parameters/);
      }
      const kept = await api<{ data: { company: Company } }>(server, `/rest/companies/${company.id}`, { credential: keyC });
      expect(kept.status, 'not deleted').to.equal(200);
      expect(kept.body.data.company.city ?? null, 'not changed').to.equal(null);
      const names: string[] = [];
      for (let cursor = ''; ;) {
        const page = await api<ListBody<'companies', Company>>(server, `/rest/companies?limit=100${cursor && `&starting_after=${cursor}`}`, { credential: keyC });
        names.push(...page.body.data.companies.map(({ name }) => name));
        if (!page.body.pageInfo.hasNextPage) break;
        cursor = page.body.pageInfo.endCursor!;
      }
      expect(names, 'nothing created').to.include('Not Dry').and.not.include('Upserted');
    });

    it('refuses a required text that shows nothing: spaces, control or invisible characters only', async () => {
      for (const name of ['', '   ', '\u00a0\u3000', '\u200b', '\u0000', '\u00ad\u2060', '\u180e', '\ufeff ']) {
        const refused = await api<ErrorBody>(server, '/rest/companies', { credential: keyC, json: { name } });
        expect([refused.status, refused.body.error], JSON.stringify(name)).to.deep.equal([400, 'invalid_request']);
        expect(refused.body.error_description, JSON.stringify(name)).to.match(/^name: required, cannot be empty/);
      }
      const kept = await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: '\u200bAcme' } });
      expect(kept.status, 'a name that shows something is kept as sent').to.equal(201);
      expect(kept.body.data.company.name).to.equal('\u200bAcme');
    });

    it('names an unknown field back only as far as a name goes: a 20,000-character one is cut short, not repeated whole', async () => {
      const name = 'x'.repeat(20_000);
      const refused = await api<ErrorBody>(server, '/rest/companies', { credential: keyC, json: { name: 'Acme', [name]: 1 } });
      expect([refused.status, refused.body.error]).to.deep.equal([400, 'invalid_request']);
      expect(refused.body.error_description).to.equal(`${'x'.repeat(64)}...: no such field on companies`);
    });

    it('refuses a required text of any other characters that draw nothing alone: joiners, variation selectors, tags, format characters, fillers, the blank Braille pattern', async () => {
      const drawNothing = ['\u200d', '\u200c', '\u034f', '\u180b', '\ufe00', '\ufe0f', '\u{e0100}', '\u{e0041}', '\u2800', '\u{1d173}', '\u17b4', '\u2065', '\u200d\u2800 '];
      for (const name of drawNothing) {
        const refused = await api<ErrorBody>(server, '/rest/companies', { credential: keyC, json: { name } });
        expect([refused.status, refused.body.error], JSON.stringify(name)).to.deep.equal([400, 'invalid_request']);
        expect(refused.body.error_description, JSON.stringify(name)).to.match(/^name: required, cannot be empty/);
      }
      // What they join or vary is shown: kept as sent.
      for (const name of ['\u{1f469}\u200d\u{1f4bb}', '\u2764\ufe0f', '\u0645\u200c\u0634']) {
        const kept = await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name } });
        expect(kept.status, JSON.stringify(name)).to.equal(201);
        expect(kept.body.data.company.name).to.equal(name);
      }
    });

    it('reads a body in a content coding named in any case (RFC 9110 section 8.4.1)', async () => {
      for (const coding of ['GZIP', ' Gzip ']) {
        const created = await api<{ data: { company: Company } }>(server, '/rest/companies', {
          credential: keyC, raw: gzipSync(JSON.stringify({ name: `coded ${coding.trim()}` })), headers: { 'content-encoding': coding },
        });
        expect(created.status, coding).to.equal(201);
        expect(created.body.data.company.name).to.equal(`coded ${coding.trim()}`);
      }
    });

    it('reads a JSON body whatever the case and spacing of its media type (RFC 9110 8.3.1)', async () => {
      for (const type of ['Application/JSON', 'application/json ; charset=utf-8', 'APPLICATION/JSON;charset=UTF-8']) {
        const created = await api(server, '/rest/companies', { credential: keyC, raw: JSON.stringify({ name: `typed ${type}` }), headers: { 'content-type': type } });
        expect(created.status, type).to.equal(201);
      }
    });

    it('names at most 20 problems of one body, however many it has', async () => {
      const json = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`unknown${i}`, i]));
      const refused = await api<ErrorBody>(server, '/rest/companies', { credential: keyC, json: { name: 'X', ...json } });
      expect(refused.status).to.equal(400);
      expect(refused.body.error_description).to.match(/^unknown0: no such field on companies; .*; and 1980 more$/);
      expect(refused.body.error_description!.length).to.be.below(1_000);
    });

    it('reads a record id in either case (RFC 9562), and an object path only as written, its escaped letters written out (RFC 3986 6.2.2)', async () => {
      const company = (await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Upper' } })).body.data.company;
      const upper = company.id.toUpperCase();
      expect((await api<{ data: { company: Company } }>(server, `/rest/companies/${upper}`, { credential: keyC })).body.data.company).to.deep.equal(company);
      const person = await api<{ data: { person: Record<string, unknown> } }>(server, '/rest/people', { credential: keyC, json: { firstName: 'Ann', companyId: upper } });
      expect(person.status, JSON.stringify(person.body)).to.equal(201);
      expect(person.body.data.person.companyId, 'kept as every id is written').to.equal(company.id);
      expect((await api(server, `/rest/companies/${upper}`, { method: 'PATCH', credential: keyC, json: { city: 'Lyon' } })).status).to.equal(200);

      const listed = await api<ListBody<'companies', Company>>(server, '/rest/%63ompanies', { credential: keyC });
      expect(listed.status).to.equal(200);
      expect(listed.body.data.companies.map(({ id }) => id)).to.include(company.id);
      const other = await api<ErrorBody>(server, '/rest/Companies', { credential: keyC });
      expect([other.status, other.body.error_description]).to.deep.equal([404, 'no object named Companies; objects: companies, people']);
      expect((await api(server, `/rest/companies/${upper}`, { method: 'DELETE', credential: keyC })).status).to.equal(200);
      expect((await api(server, `/rest/companies/${company.id}`, { credential: keyC })).status).to.equal(404);
    });

    it('says the methods each path takes: in Allow with a 405 (HEAD with GET), and to OPTIONS', async () => {
      const company = (await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: 'Methods' } })).body.data.company;
      for (const [path, allow] of [['/rest/companies', 'GET, HEAD, POST'], [`/rest/companies/${company.id}`, 'GET, HEAD, PATCH, DELETE'], ['/rest/metadata/objects', 'GET, HEAD'], ['/rest/%6detadata/objects', 'GET, HEAD'], ['/.well-known/oauth-protected-resource/rest', 'GET, HEAD']] as const) {
        const refused = await api(server, path, { method: 'PUT', credential: keyC, json: {} });
        expect([refused.status, refused.headers.get('allow')], path).to.deep.equal([405, allow]);
        const head = await fetch(`${server.issuer}${path}`, { method: 'HEAD', headers: { authorization: `Bearer ${keyC}` } });
        expect(head.status, `HEAD ${path}`).to.equal(200);
        const options = await fetch(`${server.issuer}${path}`, { method: 'OPTIONS' });
        expect([options.status, options.headers.get('allow')], `OPTIONS ${path}`).to.deep.equal([204, `${allow}, OPTIONS`]);
      }
    });

    it('counts a text\'s length in characters, as the Metadata API\'s maxLength says: an emoji is one', async () => {
      const emoji = '\u{1F600}';
      const created = await api<{ data: { company: Company } }>(server, '/rest/companies', { credential: keyC, json: { name: emoji.repeat(200) } });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const refused = await api<ErrorBody>(server, '/rest/companies', { credential: keyC, json: { name: emoji.repeat(201) } });
      expect(refused.status).to.equal(400);
      expect(refused.body.error_description).to.match(/name: at most 200 characters/);
    });
  });

  describe('retrying a create (Idempotency-Key)', () => {
    let workspace: string;
    let key: string;
    let clientToken: string;
    let memberToken: string;

    before(async () => {
      const owner = await seedUser(server, [{ workspace: 'Workspace D', role: 'admin' }]);
      workspace = owner.workspaces[0]!.id;
      key = (await createApiKey(server, workspace)).key;
      clientToken = (await clientCredentialsToken(server, workspace)).access_token;
      memberToken = (await userAccessToken(server, client, await memberOf(server, workspace, 'member'))).access_token;
    });

    const post = (credential: string, idempotencyKey: string | undefined, json: unknown, collection = 'companies') =>
      api<{ data: Record<string, Company> } & Partial<ErrorBody>>(server, `/rest/${collection}`, { credential, json, headers: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey } });
    const names = async () => (await api<ListBody<'companies', Company>>(server, '/rest/companies?limit=100', { credential: key })).body.data.companies.map((company) => company.name);

    it('makes a create sent again under the same key once: the retry answers 201 with the record the first made, marked Idempotent-Replayed', async () => {
      const first = await post(key, 'order-2026-0001', { name: 'Initech', employees: 8 });
      expect(first.status).to.equal(201);
      expect(first.headers.get('idempotent-replayed')).to.equal(null);
      const company = first.body.data.company!;
      for (const sent of ['order-2026-0001', '"order-2026-0001"']) {
        const again = await post(key, sent, { employees: 8, name: 'Initech' });
        expect(again.status, sent).to.equal(201);
        expect(again.headers.get('idempotent-replayed')).to.equal('true');
        expect(again.headers.get('location')).to.equal(`/rest/companies/${company.id}`);
        expect(again.body).to.deep.equal(first.body);
      }
      // The record as it is now, once changed.
      await api(server, `/rest/companies/${company.id}`, { method: 'PATCH', credential: key, json: { city: 'Austin' } });
      const afterChange = await post(key, 'order-2026-0001', { name: 'Initech', employees: 8 });
      expect(afterChange.body.data.company).to.include({ id: company.id, city: 'Austin' });
      expect((await names()).filter((name) => name === 'Initech')).to.have.length(1);

      // Without a key, every create is a new record.
      await post(key, undefined, { name: 'Unkeyed' });
      await post(key, undefined, { name: 'Unkeyed' });
      expect((await names()).filter((name) => name === 'Unkeyed')).to.have.length(2);
    });

    it('keeps each credential\'s keys apart, and refuses a key sent with another body or collection with 422, creating nothing', async () => {
      const byKey = await post(key, 'shared-key', { name: 'By key' });
      const byClient = await post(clientToken, 'shared-key', { name: 'By client' });
      const byMember = await post(memberToken, 'shared-key', { name: 'By member' });
      for (const response of [byKey, byClient, byMember]) expect(response.status).to.equal(201);
      expect(new Set([byKey, byClient, byMember].map((response) => response.body.data.company!.id)).size).to.equal(3);

      for (const [body, collection] of [[{ name: 'Another body' }, 'companies'], [{ name: 'By key', employees: 1 }, 'companies'], [{ firstName: 'Ann' }, 'people']] as const) {
        const reused = await post(key, 'shared-key', body, collection);
        expect(reused.status, JSON.stringify(body)).to.equal(422);
        expect(reused.body).to.include({ error: 'idempotency_key_reused' });
        expect(reused.body.error_description).to.match(/idempotency key/i);
      }
      expect(await names()).to.not.include('Another body');
      expect((await api<ListBody<'people', Company>>(server, '/rest/people', { credential: key })).body.totalCount).to.equal(0);
    });

    it('refuses a malformed key with 400 invalid_request, creating nothing', async () => {
      for (const sent of ['', ' ', '"unterminated', 'two words', 'one, two', '"a"b"', 'x'.repeat(256), 'caf\u00e9']) {
        const response = await post(key, sent, { name: 'Malformed key' });
        expect(response.status, JSON.stringify(sent)).to.equal(400);
        expect(response.body).to.include({ error: 'invalid_request' });
        expect(response.body.error_description).to.match(/^Idempotency-Key: /);
      }
      expect(await names()).to.not.include('Malformed key');
      expect((await post(key, 'x'.repeat(255), { name: 'Longest key' })).status).to.equal(201);
    });

    it('replays a create whose related record was deleted since: the retry is not refused for it', async () => {
      const company = (await post(key, undefined, { name: 'Soon gone' })).body.data.company!;
      const person = { firstName: 'Ann', lastName: 'Lee', companyId: company.id };
      const first = await post(key, 'person-of-soon-gone', person, 'people');
      expect(first.status).to.equal(201);
      await api(server, `/rest/companies/${company.id}`, { method: 'DELETE', credential: key });
      const again = await post(key, 'person-of-soon-gone', person, 'people');
      expect(again.status, JSON.stringify(again.body)).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body.data.person).to.include({ id: first.body.data.person!.id, companyId: null });
      // Without the key, the same body is refused: the company is gone.
      expect((await post(key, undefined, person, 'people')).status).to.equal(400);
    });

    it('answers 409 to a retry once the record its key made has been deleted, and makes no other', async () => {
      const first = await post(key, 'to-be-deleted', { name: 'Short lived' });
      await api(server, `/rest/companies/${first.body.data.company!.id}`, { method: 'DELETE', credential: key });
      const again = await post(key, 'to-be-deleted', { name: 'Short lived' });
      expect(again.status).to.equal(409);
      expect(again.body).to.include({ error: 'record_deleted' });
      expect(again.body.error_description).to.include(first.body.data.company!.id);
      expect(await names()).to.not.include('Short lived');
    });

    it('lets a browser send the key and read whether an answer was replayed', async () => {
      const preflight = await fetch(`${server.issuer}/rest/companies`, {
        method: 'OPTIONS',
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, idempotency-key' },
      });
      expect(preflight.headers.get('access-control-allow-headers')!.toLowerCase().split(/,\s*/)).to.include('idempotency-key');
      const response = await post(key, 'from-a-browser', { name: 'Cross origin' });
      expect(response.headers.get('access-control-expose-headers')!.toLowerCase().split(/,\s*/)).to.include('idempotent-replayed');
    });
  });

  describe('Metadata API', () => {
    interface ObjectMetadata {
      id: string;
      namePlural: string;
      nameSingular: string;
      fields: Array<{ name: string; type: string; required: boolean; readOnly: boolean; relation?: { targetObjectId: string } }>;
    }

    it('describes the object types and their fields, and the Core API accepts exactly those fields', async () => {
      const list = await api<{ data: { objects: ObjectMetadata[] }; totalCount: number }>(server, '/rest/metadata/objects', { credential: tokens.keyA });
      expect(list.status).to.equal(200);
      expect(list.body.data.objects.map((o) => o.id)).to.deep.equal(['companies', 'people']);
      expect(list.body.totalCount).to.equal(2);

      const company = await createCompany(tokens.keyA!, 'Metadata target');
      const sample: Record<string, unknown> = { TEXT: 'text', EMAIL: 'someone@example.com', NUMBER: 3, BOOLEAN: false, RELATION: company.id };
      for (const object of list.body.data.objects) {
        const one = await api<{ data: { object: ObjectMetadata } }>(server, `/rest/metadata/objects/${object.id}`, { credential: tokens.keyA });
        expect(one.body.data.object).to.deep.equal(object);
        const writable = object.fields.filter((field) => !field.readOnly);
        const body = Object.fromEntries(writable.map((field) => [field.name, sample[field.type]]));
        const created = await api<{ data: Record<string, Record<string, unknown>> }>(server, `/rest/${object.namePlural}`, { credential: tokens.keyA, json: body });
        expect(created.status, `${object.id}: ${JSON.stringify(created.body)}`).to.equal(201);
        const record = created.body.data[object.nameSingular]!;
        expect(Object.keys(record).sort()).to.deep.equal(object.fields.map((field) => field.name).sort());
        for (const field of writable) expect(record[field.name], `${object.id}.${field.name}`).to.deep.equal(body[field.name]);
        for (const field of object.fields.filter((f) => f.readOnly)) {
          const refused = await api(server, `/rest/${object.namePlural}`, { credential: tokens.keyA, json: { ...body, [field.name]: record[field.name] } });
          expect(refused.status, `${object.id}.${field.name} is read-only`).to.equal(400);
        }
        for (const field of writable.filter((f) => f.required)) {
          const { [field.name]: _omitted, ...rest } = body;
          const refused = await api(server, `/rest/${object.namePlural}`, { credential: tokens.keyA, json: rest });
          expect(refused.status, `${object.id}.${field.name} is required`).to.equal(400);
        }
      }
      const unknown = await api<ErrorBody>(server, '/rest/metadata/objects/deals', { credential: tokens.keyA });
      expect(unknown.status).to.equal(404);
    });
  });

  describe('from a browser on another origin', () => {
    it('answers the CORS preflight for Authorization, and every response (errors too) may be read cross-origin, without cookies', async () => {
      const preflight = await fetch(`${server.issuer}/rest/companies`, {
        method: 'OPTIONS',
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
      });
      expect(preflight.status).to.equal(204);
      expect(preflight.headers.get('access-control-allow-origin')).to.equal('*');
      expect(preflight.headers.get('access-control-allow-methods')).to.equal('GET, HEAD, POST');
      const ofRecord = await fetch(`${server.issuer}/rest/companies/00000000-0000-4000-8000-000000000000`, {
        method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'PATCH' },
      });
      expect(ofRecord.headers.get('access-control-allow-methods')).to.equal('GET, HEAD, PATCH, DELETE');
      expect(ofRecord.headers.get('access-control-allow-headers')!.toLowerCase().split(/,\s*/), 'a conditional change from a page').to.include.members(['if-match', 'if-none-match']);
      const ofMetadata = await fetch(`${server.issuer}/rest/metadata/objects`, {
        method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' },
      });
      expect(ofMetadata.headers.get('access-control-allow-methods'), 'the Metadata API is read-only').to.equal('GET, HEAD');
      expect(preflight.headers.get('access-control-allow-headers')!.toLowerCase()).to.include('authorization').and.include('content-type');
      expect(preflight.headers.get('access-control-allow-credentials')).to.equal(null);

      for (const credential of [undefined, tokens.keyA]) {
        const response = await api(server, '/rest/companies', { headers: { origin: 'https://app.example' }, ...(credential ? { credential } : {}) });
        expect(response.headers.get('access-control-allow-origin')).to.equal('*');
        expect(response.headers.get('access-control-expose-headers')).to.include('WWW-Authenticate');
        expect(response.headers.get('set-cookie')).to.equal(null);
      }
    });
  });

  describe('protected resource metadata (RFC 9728)', () => {
    it('names the authorization server, the scope and the bearer method, at the resource\'s well-known URL and the bare one', async () => {
      for (const path of ['/.well-known/oauth-protected-resource/rest', '/.well-known/oauth-protected-resource']) {
        const response = await fetch(`${server.origin}${path}`);
        expect(response.status, path).to.equal(200);
        expect(response.headers.get('access-control-allow-origin')).to.equal('*');
        const metadata = await response.json() as Record<string, unknown>;
        expect(metadata).to.deep.include({
          resource: `${server.issuer}/rest`,
          authorization_servers: [server.issuer],
          scopes_supported: ['api'],
          bearer_methods_supported: ['header'],
        });
        // The authorization server it names publishes its metadata where RFC 8414 says.
        const discovery = await fetch(`${server.origin}/.well-known/oauth-authorization-server`);
        expect(((await discovery.json()) as { issuer: string }).issuer).to.equal(server.issuer);
      }
    });
  });
});
