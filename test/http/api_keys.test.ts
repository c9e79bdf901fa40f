import { readdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';

import { expect } from 'chai';

import { api, createApiKey } from '../support/data_api.ts';
import { introspect, postCredentials, registerClient, tokenRequest } from '../support/oauth.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { initialAccessToken, seedUser, startServer, type TestServer } from '../support/server.ts';
import { generateApiKey } from '../../src/api_keys/format.ts';

/**
 * API keys: the other way into the data API ("Data API calls authenticate with either an API key
 * or an OAuth access token"). Created, listed and revoked with the admin CLI as an operator would,
 * used over HTTP against the real server.
 */

interface ShownKey {
  id: string;
  name: string;
  workspace_id: string;
  hint: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  key?: string;
}

const KEY_SHAPE = /^wsk_[0-9A-Za-z]{38}$/;

/** The same key with one character of its secret changed. */
function mistyped(key: string): string {
  const at = 10;
  return `${key.slice(0, at)}${key[at] === 'a' ? 'b' : 'a'}${key.slice(at + 1)}`;
}

describe('API keys', function () {
  this.timeout(60_000);

  let server: TestServer;
  let workspaceId: string;

  before(async () => {
    server = await startServer();
    workspaceId = (await seedUser(server, [{ workspace: 'Keys', role: 'admin' }])).workspaces[0]!.id;
  });

  after(async () => {
    await server?.stop();
  });

  const listKeys = async () => {
    const result = await server.admin(['api-key', 'list', '--workspace', workspaceId, '--json']);
    expect(result.code, result.stderr).to.equal(0);
    return JSON.parse(result.stdout) as ShownKey[];
  };

  it('are created by the admin CLI, shown once with their id, recognisable by their prefix, and stored only as a digest', async () => {
    const created = await createApiKey(server, workspaceId, { name: 'nightly export', expiresIn: '90d' }) as unknown as ShownKey & { key: string };
    expect(created.key).to.match(KEY_SHAPE);
    expect(created).to.include({ name: 'nightly export', workspace_id: workspaceId, hint: created.key.slice(0, 8), last_used_at: null });
    expect(Date.parse(created.expires_at!) - Date.parse(created.created_at)).to.equal(90 * 86_400_000);

    const text = await server.admin(['api-key', 'create', '--workspace', workspaceId, '--name', 'second']);
    expect(text.code).to.equal(0);
    expect(text.stdout).to.match(/shown once/).and.match(/wsk_[0-9A-Za-z]{38}/);

    const listed = await listKeys();
    const { key: _shownOnce, ...withoutKey } = created;
    expect(listed.find((key) => key.id === created.id)).to.deep.equal(withoutKey);
    expect(JSON.stringify(listed)).to.not.include(created.key.slice(8));

    const database = server.store.replace(/^sqlite:/, '');
    const files = (await readdir(dirname(database))).map((name) => `${dirname(database)}/${name}`);
    for (const file of files) expect((await readFile(file)).includes(created.key.slice(8)), file).to.equal(false);
  });

  it('open the workspace\'s data to whoever holds one, and nothing of another workspace', async () => {
    const { key } = await createApiKey(server, workspaceId);
    const created = await api<{ data: { company: { id: string } } }>(server, '/rest/companies', { credential: key, json: { name: 'Keyed' } });
    expect(created.status).to.equal(201);
    const other = await seedUser(server, [{ workspace: 'Elsewhere', role: 'admin' }]);
    const otherKey = (await createApiKey(server, other.workspaces[0]!.id)).key;
    expect((await api(server, `/rest/companies/${created.body.data.company.id}`, { credential: otherKey })).status).to.equal(404);
    expect((await api(server, `/rest/companies/${created.body.data.company.id}`, { credential: key })).status).to.equal(200);
  });

  it('refuse a mistyped, truncated or unknown key with 401 invalid_token', async () => {
    const { key } = await createApiKey(server, workspaceId);
    for (const credential of [mistyped(key), key.slice(0, -1), `${key}0`, 'wsk_', 'wsk_0000000000000000000000000000000000000000']) {
      const response = await api<{ error: string }>(server, '/rest/companies', { credential });
      expect(response.status, credential).to.equal(401);
      expect(response.body.error).to.equal('invalid_token');
      expect(response.headers.get('www-authenticate')).to.match(/error="invalid_token"/);
    }
    expect((await api(server, '/rest/companies', { credential: key })).status).to.equal(200);
  });

  it('stop working on every request once the CLI says revoked, and leave the list', async () => {
    const { id, key } = await createApiKey(server, workspaceId);
    expect((await api(server, '/rest/companies', { credential: key })).status).to.equal(200);
    const revoked = await server.admin(['api-key', 'revoke', id]);
    expect(revoked.code, revoked.stderr).to.equal(0);
    expect(revoked.stdout).to.match(/revoked API key/);
    const refused = await api<{ error: string }>(server, '/rest/companies', { credential: key });
    expect(refused.status).to.equal(401);
    expect(refused.body.error).to.equal('invalid_token');
    expect((await listKeys()).map((k) => k.id)).to.not.include(id);
    const again = await server.admin(['api-key', 'revoke', id]);
    expect(again.code).to.equal(1);
    expect(again.stderr).to.match(/no API key with id/);
  });

  it('stop working once expired', async () => {
    const { key } = await createApiKey(server, workspaceId, { expiresIn: '2s' });
    expect((await api(server, '/rest/companies', { credential: key })).status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    expect((await api(server, '/rest/companies', { credential: key })).status).to.equal(401);
  });

  it('record when they were last used, to the minute, without a write on every request', async () => {
    const { id, key } = await createApiKey(server, workspaceId);
    expect((await listKeys()).find((k) => k.id === id)!.last_used_at).to.equal(null);
    const before = Math.floor(Date.now() / 1000) * 1000;
    expect((await api(server, '/rest/companies', { credential: key })).status).to.equal(200);
    const first = (await listKeys()).find((k) => k.id === id)!.last_used_at!;
    expect(Date.parse(first)).to.be.within(before, Date.now());
    await new Promise((resolve) => setTimeout(resolve, 1100));
    for (let i = 0; i < 5; i += 1) expect((await api(server, '/rest/companies', { credential: key })).status).to.equal(200);
    // Within the minute, later uses are not written: the recorded time is the first use's.
    expect((await listKeys()).find((k) => k.id === id)!.last_used_at).to.equal(first);
  });

  it('are never accepted at the OAuth endpoints, and a credential is checked only as what its prefix says it is', async () => {
    const { key } = await createApiKey(server, workspaceId);
    expect((await api(server, '/rest/companies', { credential: key })).status, 'a working key').to.equal(200);
    // Userinfo says plainly why, in the challenge and the body alike, whether sent in the header or the form.
    const plainly = 'API keys are not accepted here: userinfo needs an OAuth access token issued to a user, with the profile or openid scope';
    for (const userinfo of [
      await fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${key}` } }),
      await fetch(`${server.issuer}/oauth/userinfo`, { method: 'POST', body: new URLSearchParams({ access_token: key }) }),
    ]) {
      expect(userinfo.status).to.equal(401);
      // The Bearer challenge carries the error; the DPoP one (RFC 9449) only says that DPoP-bound tokens are taken too.
      expect(userinfo.headers.get('www-authenticate')).to.equal(`Bearer realm="oauth", error="invalid_token", error_description="${plainly}", DPoP realm="oauth", algs="ES256 PS256 EdDSA Ed25519"`);
      expect(await userinfo.json()).to.include({ error: 'invalid_token', error_description: plainly });
    }
    const notAKey = await fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: 'Bearer not-a-key-nor-a-token' } });
    expect(((await notAKey.json()) as { error_description: string }).error_description, 'anything else is an invalid token, as before').to.not.include('API keys');

    const client = await registerClient(server.issuer);
    expect(await introspect(server.issuer, postCredentials(client), key)).to.deep.equal({ active: false });
    const asSecret = await tokenRequest(server.issuer, { grant_type: 'client_credentials', client_id: client.client_id, client_secret: key });
    expect(asSecret.status).to.equal(401);
    const asRegistrationToken = await fetch(client.registration_client_uri, { headers: { authorization: `Bearer ${key}` } });
    expect(asRegistrationToken.status).to.equal(401);

    // An OAuth access token dressed as a key is not looked at as a token.
    const machine = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, workspaceId));
    const token = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', ...postCredentials(machine) });
    const accessToken = ((await token.json()) as { access_token: string }).access_token;
    expect((await api(server, '/rest/companies', { credential: accessToken })).status).to.equal(200);
    expect((await api(server, '/rest/companies', { credential: `wsk_${accessToken}` })).status).to.equal(401);
  });

  it('take a name of 100 characters as a person counts them, emoji included', async () => {
    const emoji = '\u{1F511}'.repeat(100);
    const created = await server.admin(['api-key', 'create', '--workspace', workspaceId, '--name', emoji, '--json']);
    expect(created.code, created.stderr).to.equal(0);
    expect((JSON.parse(created.stdout) as { name: string }).name).to.equal(emoji);
    expect((await server.admin(['api-key', 'create', '--workspace', workspaceId, '--name', `${emoji}x`])).stderr).to.match(/1 to 100 printable characters/);
  });

  it('tell the operator what is wrong with a command', async () => {
    const cases: Array<[string[], number, RegExp]> = [
      [['api-key', 'create', '--workspace', 'ws_nope', '--name', 'x'], 1, /no workspace with id ws_nope/],
      [['api-key', 'create', '--workspace', workspaceId], 2, /--name is required/],
      [['api-key', 'create', '--workspace', workspaceId, '--name', 'x', '--expires-in', 'soon'], 2, /--expires-in must be a duration/],
      [['api-key', 'create', '--workspace', workspaceId, '--name', 'forever and more', '--expires-in', '999999999d'], 2, /--expires-in must be a duration .*at most 36500d/],
      [['api-key', 'create', '--workspace', workspaceId, '--name', ' '], 1, /needs a name/],
      [['api-key', 'create', '--workspace', workspaceId, '--name', 'tropxe \u202Enightly'], 1, /changes the direction text is shown in/],
      [['api-key', 'create', '--workspace', workspaceId, '--name', 'night\u200Bly'], 1, /an invisible one/],
      [['api-key', 'create', '--workspace', workspaceId, '--name', 'line one\u2028line two'], 1, /1 to 100 printable characters/],
      [['api-key', 'revoke'], 2, /name the key/],
      [['api-key', 'list', '--workspace', 'ws_nope'], 1, /no workspace with id ws_nope/],
    ];
    for (const [args, code, message] of cases) {
      const result = await server.admin(args);
      expect(result.code, args.join(' ')).to.equal(code);
      expect(result.stderr, args.join(' ')).to.match(message);
    }
    // Nothing was written: the list still reads, and holds no key from the refused commands.
    const listed = await server.admin(['api-key', 'list', '--workspace', workspaceId, '--json']);
    expect(listed.code, listed.stderr).to.equal(0);
    expect(listed.stdout).to.not.include('forever and more');
  });

  describe('on Redis', () => {
    let redis: RedisServer;
    let onRedis: TestServer;

    before(async () => {
      redis = await startRedis();
      onRedis = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') } });
    });

    after(async () => {
      await onRedis?.stop();
      await redis?.stop();
    });

    it('work the same, and a mistyped key is refused without asking the store (it answers even while Redis is frozen)', async () => {
      const owner = await seedUser(onRedis, [{ workspace: 'Redis keys', role: 'admin' }]);
      const { key } = await createApiKey(onRedis, owner.workspaces[0]!.id);
      expect((await api(onRedis, '/rest/companies', { credential: key, json: { name: 'On Redis' } })).status).to.equal(201);

      redis.pause();
      try {
        const typo = await api(onRedis, '/rest/companies', { credential: mistyped(key) });
        expect(typo.status, 'checksum refuses it: no store read').to.equal(401);
        const lookup = await api(onRedis, '/rest/companies', { credential: generateApiKey() });
        expect(lookup.status, 'a well-formed unknown key needs the store: unavailable').to.equal(503);
      } finally {
        redis.resume();
      }
    });
  });
});
