import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWK } from 'jose';

import { openStore } from '../../adapters/index.ts';
import { ConfigError, loadConfig } from '../../config/index.ts';
import { KeyRing } from '../../src/keys/key_encryption.ts';
import { loadKeys } from '../../src/keys/keys.ts';
import { api, clientCredentialsToken } from '../support/data_api.ts';
import { codeRequest, exchangeCode, introspect, postCredentials, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { runAdmin, type SeededUser, seedUser, startServer, storedSetting, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { privateJwk } from '../support/keys.ts';
import { redisCli, startRedis } from '../support/redis.ts';
import { eventually } from '../support/wait.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const KEK = Buffer.alloc(32, 7).toString('base64url');

interface ListedKey {
  kid: string;
  alg: string;
  state: string;
  published_at: string;
  signs_from: string;
  signs_until: string | null;
  removed_at: string | null;
}

interface Rotation {
  new_keys: Array<{ kid: string; alg: string }>;
  signs_from: string;
  replaced_keys_removed_at: string | null;
  keys: ListedKey[];
}

async function publishedKids(server: TestServer): Promise<string[]> {
  const { keys } = await (await fetch(`${server.issuer}/oauth/jwks`)).json() as { keys: JWK[] };
  return keys.map((key) => key.kid!).sort();
}

async function publishedJwks(server: TestServer): Promise<{ keys: JWK[] }> {
  return (await fetch(`${server.issuer}/oauth/jwks`)).json() as Promise<{ keys: JWK[] }>;
}

const kidOf = (jwt: string) => decodeProtectedHeader(jwt).kid;

async function admin(server: TestServer, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return server.admin(args);
}

async function rotate(server: TestServer, ...flags: string[]): Promise<Rotation> {
  const result = await admin(server, ['keys', 'rotate', '--json', ...flags]);
  expect(result.code, result.stderr).to.equal(0);
  return JSON.parse(result.stdout) as Rotation;
}

async function listKeys(server: TestServer): Promise<ListedKey[]> {
  const result = await admin(server, ['keys', 'list', '--json']);
  expect(result.code, result.stderr).to.equal(0);
  return JSON.parse(result.stdout) as ListedKey[];
}

const states = (keys: ListedKey[]) => Object.fromEntries(keys.map((key) => [key.kid, key.state]));

interface UserTokens {
  access_token: string;
  refresh_token: string;
  id_token: string;
}

/** A user's tokens through the real code flow, with `openid` for an ID token, the code redeemed at `tokenServer`. */
async function userTokens(server: TestServer, client: RegisteredClient, user: SeededUser, tokenServer = server): Promise<UserTokens> {
  const { url, verifier } = codeRequest(server.issuer, client.client_id, { scope: 'openid api' });
  const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
  const response = await exchangeCode(tokenServer.issuer, client, callback.searchParams.get('code')!, verifier);
  expect(response.status, `${callback.href} ${await response.clone().text()}`).to.equal(200);
  return response.json() as Promise<UserTokens>;
}

describe('signing-key rotation', () => {
  describe('announced ahead, on two instances of one store', () => {
    let first: TestServer;
    let second: TestServer;
    let user: SeededUser;
    let client: RegisteredClient;
    let workspaceId: string;
    let earlier: { kids: string[]; es256: string; rs256: string; user: UserTokens; clientCredentials: string; machine: RegisteredClient };
    let rotation: Rotation;

    const machineToken = async (server: TestServer) => {
      const response = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', ...postCredentials(earlier.machine) });
      expect(response.status).to.equal(200);
      return ((await response.json()) as { access_token: string }).access_token;
    };

    before(async () => {
      // A day of pre-publication: nothing signs with the new keys unless the operator says --now.
      first = await startServer({ env: { KEY_PREPUBLISH: '1d' } });
      // Instances behind one load balancer: one issuer, one store; the second is reached at its own port.
      const instance = await startServer({ store: first.store, env: { BASE_URL: first.issuer, KEY_PREPUBLISH: '1d' } });
      second = { ...instance, issuer: instance.origin };
      user = await seedUser(first);
      workspaceId = user.workspaces[0]!.id;
      client = await registerClient(first.issuer, { grant_types: ['authorization_code', 'refresh_token'] });
      const tokens = await userTokens(first, client, user);
      const machine = await clientCredentialsToken(first, workspaceId);
      earlier = {
        kids: await publishedKids(first),
        es256: kidOf(machine.access_token)!,
        rs256: kidOf(tokens.id_token)!,
        user: tokens,
        clientCredentials: machine.access_token,
        machine: machine.client,
      };
      expect(earlier.kids).to.have.length(2);
    });

    after(async () => {
      await second?.stop();
      await first?.stop();
    });

    it('publishes the new keys on every instance at once, while the old ones still sign', async () => {
      rotation = await rotate(first);
      const added = rotation.new_keys.map((key) => key.kid);
      expect(rotation.new_keys.map((key) => key.alg).sort()).to.deep.equal(['ES256', 'RS256']);
      expect(added.some((kid) => earlier.kids.includes(kid))).to.equal(false);

      const both = [...earlier.kids, ...added].sort();
      for (const server of [first, second]) {
        await eventually(`${server.origin} publishes old and new keys`, async () => (await publishedKids(server)).join() === both.join() ? true : undefined);
        expect(kidOf(await machineToken(server)), 'an access token during pre-publication').to.equal(earlier.es256);
      }
      expect(kidOf((await userTokens(first, client, user, second)).id_token), 'an ID token during pre-publication').to.equal(earlier.rs256);

      const listed = await listKeys(first);
      expect(states(listed)).to.deep.equal({ [earlier.es256]: 'current', [earlier.rs256]: 'current', [added[0]!]: 'next', [added[1]!]: 'next' });
      const newKey = listed.find((key) => key.kid === added[0])!;
      expect(Date.parse(newKey.signs_from) - Date.parse(newKey.published_at), 'the pre-publication period').to.equal(86_400_000);
    });

    it('refuses a second rotation while one is under way, and with --now makes the announced keys sign everywhere', async () => {
      const refused = await admin(first, ['keys', 'rotate']);
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.match(/already under way.*--now/);

      const promoted = await rotate(first, '--now');
      expect(promoted.new_keys).to.deep.equal(rotation.new_keys);
      const es256 = rotation.new_keys.find((key) => key.alg === 'ES256')!.kid;
      const rs256 = rotation.new_keys.find((key) => key.alg === 'RS256')!.kid;
      for (const server of [first, second]) {
        await eventually(`${server.origin} signs with the new ES256 key`, async () => kidOf(await machineToken(server)) === es256 ? true : undefined);
      }
      expect(kidOf((await userTokens(first, client, user, second)).id_token), 'a new ID token').to.equal(rs256);

      const listed = await listKeys(second);
      expect(states(listed)).to.deep.equal({ [earlier.es256]: 'retiring', [earlier.rs256]: 'retiring', [es256]: 'current', [rs256]: 'current' });
      const old = listed.find((key) => key.kid === earlier.es256)!;
      expect(old.signs_until).to.equal(promoted.signs_from);
      // Removed once every token the old keys signed has expired: the longest JWT lifetime (1 h) plus a minute of skew.
      expect(Date.parse(old.removed_at!) - Date.parse(promoted.signs_from)).to.equal(3660_000);
    });

    it('keeps accepting the tokens signed before the rotation, on both instances, while the JWKS carries both keys', async () => {
      for (const server of [first, second]) {
        expect((await publishedKids(server)).length, 'old and new keys published').to.equal(4);
        expect((await api(server, '/rest/companies', { credential: earlier.user.access_token })).status, 'a user\'s access token').to.equal(200);
        expect((await api(server, '/rest/companies', { credential: earlier.clientCredentials })).status, 'a client-credentials token').to.equal(200);
        expect(await introspect(server.issuer, postCredentials(client), earlier.user.access_token)).to.include({ active: true });
        const { payload } = await jwtVerify(earlier.user.id_token, createLocalJWKSet(await publishedJwks(server)), { issuer: first.issuer, audience: client.client_id });
        expect(payload.sub, 'the ID token verifies against the published keys').to.equal(user.id);
      }
      const refreshed = await tokenRequest(second.issuer, { grant_type: 'refresh_token', refresh_token: earlier.user.refresh_token, ...postCredentials(client) });
      expect(refreshed.status, 'a refresh token issued before the rotation').to.equal(200);
      const { access_token: fresh } = await refreshed.json() as { access_token: string };
      expect(kidOf(fresh)).to.equal(rotation.new_keys.find((key) => key.alg === 'ES256')!.kid);
      expect((await api(first, '/rest/companies', { credential: fresh })).status).to.equal(200);
    });
  });

  describe('the end of the overlap', () => {
    let server: TestServer;

    before(async () => {
      server = await startServer({ env: { KEY_PREPUBLISH: '3s', KEY_RETENTION: '4s', KEY_ENCRYPTION_KEY: KEK } });
    });

    after(async () => {
      await server?.stop();
    });

    it('rotates once when asked twice at once, never stores a private key unsealed, and removes the replaced keys on time', async () => {
      const user = await seedUser(server);
      const { access_token: old } = await clientCredentialsToken(server, user.workspaces[0]!.id);
      const oldKids = await publishedKids(server);

      const results = await Promise.all([admin(server, ['keys', 'rotate', '--json']), admin(server, ['keys', 'rotate', '--json'])]);
      expect(results.map((result) => result.code).sort(), results.map((result) => result.stderr).join('\n')).to.deep.equal([0, 1]);
      expect(results.find((result) => result.code === 1)!.stderr).to.match(/already under way/);
      const rotation = JSON.parse(results.find((result) => result.code === 0)!.stdout) as Rotation;
      const removedAt = Date.parse(rotation.replaced_keys_removed_at!);
      expect(removedAt - Date.parse(rotation.signs_from)).to.equal(4000);

      const sealed = await storedSetting(server, 'signing_jwks');
      expect(sealed).to.match(/^kek1\./);
      expect(sealed).to.not.include('"d"');
      const opened = JSON.parse(new KeyRing(Buffer.from(KEK, 'base64url')).open(sealed!)) as { keys: JWK[] };
      expect(opened.keys.map((key) => key.kid).sort(), 'the store holds exactly the old and the new keys').to.deep.equal([...oldKids, ...rotation.new_keys.map((key) => key.kid)].sort());

      const gone = await eventually('the replaced keys leave the JWKS', async () => {
        const kids = await publishedKids(server);
        if (kids.some((kid) => oldKids.includes(kid))) return undefined;
        return { kids, at: Date.now() };
      });
      expect(gone.at, 'not before their time').to.be.at.least(removedAt);
      expect(gone.kids).to.deep.equal(rotation.new_keys.map((key) => key.kid).sort());

      const refused = await api(server, '/rest/companies', { credential: old });
      expect(refused.status, 'a token signed by a removed key').to.equal(401);
      expect(refused.body).to.include({ error: 'invalid_token' });
      expect(Object.values(states(await listKeys(server))).sort()).to.deep.equal(['current', 'current', 'retired', 'retired']);
    });
  });

  describe('on a schedule (KEY_ROTATION_DAYS)', () => {
    let server: TestServer;

    before(async () => {
      // 0.0001 days is 8.64 s: a new key is published 3 s before the current one has signed that long.
      server = await startServer({ env: { KEY_ROTATION_DAYS: '0.0001', KEY_PREPUBLISH: '3s', KEY_RETENTION: '1h' } });
    });

    after(async () => {
      await server?.stop();
    });

    it('publishes new keys and then signs with them without anyone asking', async () => {
      const user = await seedUser(server);
      const { client, access_token: token } = await clientCredentialsToken(server, user.workspaces[0]!.id);
      const oldKid = kidOf(token);
      const newKid = await eventually('a token is signed by a new key', async () => {
        const response = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', ...postCredentials(client) });
        const kid = kidOf(((await response.json()) as { access_token: string }).access_token);
        return kid === oldKid ? undefined : kid;
      });
      expect(await publishedKids(server), 'the new key and the one it replaces').to.include.members([oldKid!, newKid!]);
      expect((await api(server, '/rest/companies', { credential: token })).status, 'the token signed before').to.equal(200);
      expect(server.logs()).to.contain('rotated the signing keys on schedule');
    });
  });

  describe('a key set stored before rotation existed', () => {
    let dir: string;
    let server: TestServer;
    let legacy: JWK[];

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'legacy-keys-'));
      legacy = [await privateJwk('ES256'), await privateJwk('RS256')];
      const store = openStore(`sqlite:${join(dir, 'oauth.sqlite')}`);
      await store.settings.put('signing_jwks', new KeyRing(Buffer.from(KEK, 'base64url')).seal(JSON.stringify({ keys: legacy })));
      await store.close();
      // Long enough that the new keys are still announced ('next') when the rotation's answer lists them, on a slow machine too.
      server = await startServer({ store: `sqlite:${join(dir, 'oauth.sqlite')}`, env: { KEY_ENCRYPTION_KEY: KEK, KEY_PREPUBLISH: '5m' } });
    });

    after(async () => {
      await server?.stop();
      await rm(dir, { recursive: true, force: true });
    });

    it('keeps signing with its keys, lists them as current and rotates them', async () => {
      expect(await publishedKids(server)).to.deep.equal(legacy.map((key) => key.kid!).sort());
      const user = await seedUser(server);
      const { access_token: token } = await clientCredentialsToken(server, user.workspaces[0]!.id);
      expect(kidOf(token)).to.equal(legacy[0]!.kid);
      expect(states(await listKeys(server))).to.deep.equal({ [legacy[0]!.kid!]: 'current', [legacy[1]!.kid!]: 'current' });
      const rotation = await rotate(server);
      expect(states(rotation.keys)).to.include({ [legacy[0]!.kid!]: 'current', [rotation.new_keys[0]!.kid]: 'next' });
    });
  });

  describe('configuration', () => {
    it('defaults to an hour of pre-publication, the longest token lifetime plus a minute of overlap, and no schedule', () => {
      expect(loadConfig({}).keyRotation).to.deep.equal({ prepublishSeconds: 3600, retentionSeconds: 3660, everySeconds: undefined });
      expect(loadConfig({ KEY_PREPUBLISH: '2h', KEY_RETENTION: '90m', KEY_ROTATION_DAYS: '30' }).keyRotation)
        .to.deep.equal({ prepublishSeconds: 7200, retentionSeconds: 5400, everySeconds: 30 * 86_400 });
    });

    it('refuses values that would break the overlap, naming the variable', () => {
      const bad: Array<[Record<string, string>, RegExp]> = [
        [{ KEY_PREPUBLISH: 'soon' }, /KEY_PREPUBLISH must be a duration/],
        [{ KEY_PREPUBLISH: '2s' }, /KEY_PREPUBLISH must be at least 3s/],
        [{ KEY_RETENTION: '-1' }, /KEY_RETENTION must be a duration/],
        [{ KEY_ROTATION_DAYS: 'monthly' }, /KEY_ROTATION_DAYS must be a positive number of days/],
        [{ KEY_ROTATION_DAYS: '0' }, /KEY_ROTATION_DAYS must be a positive number of days/],
        [{ KEY_ROTATION_DAYS: '1', KEY_PREPUBLISH: '2d' }, /KEY_ROTATION_DAYS .* must be longer than KEY_PREPUBLISH/],
      ];
      for (const [env, message] of bad) expect(() => loadConfig(env), JSON.stringify(env)).to.throw(ConfigError, message);
    });
  });

  describe('a store that loses the keys under a running service', () => {
    it('says so in an error line, once, and keeps signing with the keys it holds (a Redis restarted empty)', async function () {
      this.timeout(30_000);
      const redis = await startRedis();
      const server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64url') } });
      try {
        const before = (await (await fetch(`${server.issuer}/oauth/jwks`)).json() as { keys: JWK[] }).keys.map((key) => key.kid);
        await redisCli(redis.port, 'FLUSHALL');
        const line = await eventually('the error line', () => server.logs().split('\n').find((text) => text.includes('the store no longer holds the signing keys')), 10_000, 100);
        expect(JSON.parse(line)).to.include({ level: 'error' });
        // Said once, not at every read of the set.
        await new Promise((resolve) => setTimeout(resolve, 4_500));
        expect(server.logs().split('\n').filter((text) => text.includes('the store no longer holds the signing keys'))).to.have.length(1);
        const after = (await (await fetch(`${server.issuer}/oauth/jwks`)).json() as { keys: JWK[] }).keys.map((key) => key.kid);
        expect(after, 'the keys in use stay in use').to.deep.equal(before);
      } finally {
        await server.stop();
        await redis.stop();
      }
    });
  });

  describe('with an operator-supplied JWKS_FILE', () => {
    let dir: string;
    let env: Record<string, string>;
    let keys: JWK[];

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'jwks-file-'));
      keys = [await privateJwk('ES256'), await privateJwk('RS256')];
      await writeFile(join(dir, 'jwks.json'), JSON.stringify({ keys }));
      env = { PATH: process.env.PATH ?? '', STORE: `sqlite:${join(dir, 'oauth.sqlite')}`, JWKS_FILE: join(dir, 'jwks.json') };
      // The store the service would have made at its first start (the admin CLI makes none): with
      // JWKS_FILE, its cookie keys.
      const store = openStore(env.STORE!);
      await loadKeys(store.settings, new KeyRing(randomBytes(32)), env.JWKS_FILE).finally(() => store.close());
    });

    after(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('refuses to rotate, saying why, and lists the file\'s keys', async () => {
      const refused = await runAdmin(env, ['keys', 'rotate']);
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.match(/JWKS_FILE .*never rotates/);
      expect(await readFile(join(dir, 'jwks.json'), 'utf8')).to.equal(JSON.stringify({ keys }));

      const listed = await runAdmin(env, ['keys', 'list', '--json']);
      expect(listed.code, listed.stderr).to.equal(0);
      expect(JSON.parse(listed.stdout)).to.deep.equal(keys.map((key) => ({ kid: key.kid, alg: key.alg, state: 'current', source: 'JWKS_FILE' })));

      const scheduled = await runAdmin({ ...env, KEY_ROTATION_DAYS: '30' }, ['keys', 'list']);
      expect(scheduled.code).to.equal(1);
      expect(scheduled.stderr).to.match(/KEY_ROTATION_DAYS .*JWKS_FILE/);
    });
  });

  describe('the conformance module oidcc-server-rotate-keys', () => {
    let server: TestServer;

    before(async () => {
      server = await startServer({ env: { PKCE_REQUIRED: 'public' } });
    });

    after(async () => {
      await server?.stop();
    });

    it('passes when the runner is given the rotation command', async () => {
      const argv = ['conformance/run.ts', '--base-url', server.issuer, '--email', 'nobody@example.com', '--password', 'unused',
        '--plan', 'dynamic', '--module', 'oidcc-server-rotate-keys', '--rotate-keys-command', `"${process.execPath}" src/cli/admin.ts keys rotate`, '--json'];
      const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, argv, { cwd: ROOT, env: server.env, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
        child.stderr.on('data', (chunk: Buffer) => { err += chunk.toString(); });
        child.on('exit', (exitCode) => resolve({ code: exitCode, stdout: out, stderr: err }));
      });
      expect(code, stderr).to.equal(0);
      const [row] = (JSON.parse(stdout) as { results: Array<{ module: string; status: string; warnings: string[] }> }).results;
      expect(row).to.include({ module: 'oidcc-server-rotate-keys', status: 'pass' });
      expect(row!.warnings, 'the old keys are still published').to.deep.equal([]);
    });
  });
});
