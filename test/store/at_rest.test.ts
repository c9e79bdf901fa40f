import { spawnSync } from 'node:child_process';
import { hash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';

import { openStore, sqliteFile } from '../../adapters/index.ts';
import { KeyRing } from '../../src/keys/key_encryption.ts';
import { api, createApiKey } from '../support/data_api.ts';
import { codeRequest, exchangeCode, postCredentials, registerClient, tokenRequest } from '../support/oauth.ts';
import { keysUnder, rawRedis, startRedis, type RedisServer } from '../support/redis.ts';
import { initialAccessToken, seedUser, startServer, storedSetting, type TestServer } from '../support/server.ts';
import { UserAgent, authorize, field, formAction } from '../support/user_agent.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const KEY_A = Buffer.alloc(32, 1).toString('base64url');
const KEY_B = Buffer.alloc(32, 2).toString('base64url');

/** Every byte the embedded store has on disk: the database and its write-ahead log. */
async function storeBytes(server: TestServer): Promise<string> {
  const file = sqliteFile(server.store)!;
  const parts = await Promise.all([file, `${file}-wal`].map((path) => readFile(path).catch(() => Buffer.alloc(0))));
  return Buffer.concat(parts).toString('latin1');
}

/** Every key Redis holds and every value under it, read by type (a backup holds the same). */
async function redisContents(url: string): Promise<string> {
  const keys = [...(await keysUnder(url, '')).keys()];
  const client = await rawRedis(url);
  try {
    const parts: string[] = [];
    for (const key of keys) {
      const type = await client.type(key);
      const value = type === 'string' ? await client.get(key)
        : type === 'hash' ? await client.hgetall(key)
          : type === 'zset' ? await client.zrange(key, '0', '-1')
            : type === 'set' ? await client.smembers(key)
              : type === 'list' ? await client.lrange(key, '0', '-1') : `(${type})`;
      parts.push(key, JSON.stringify(value));
    }
    return parts.join('\n');
  } finally {
    client.disconnect();
  }
}

const BACKENDS: Array<{ name: string; start(): Promise<{ server: TestServer; contents(): Promise<string>; stop(): Promise<void> }> }> = [
  {
    name: 'the SQLite file',
    async start() {
      const server = await startServer();
      return { server, contents: () => storeBytes(server), stop: () => server.stop() };
    },
  },
  {
    name: 'Redis',
    async start() {
      const redis: RedisServer = await startRedis();
      const server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY: KEY_A } });
      return { server, contents: () => redisContents(redis.url), stop: async () => { await server.stop(); await redis.stop(); } };
    },
  },
];

describe('a copy of the store', function () {
  this.timeout(60_000);

  for (const backend of BACKENDS) {
    describe(`in ${backend.name}`, () => {
      let server: TestServer;
      let contents: () => Promise<string>;
      let stop: () => Promise<void>;

      before(async () => {
        ({ server, contents, stop } = await backend.start());
      });

      after(async () => {
        await stop?.();
      });

      it('holds no credential the service handed out: codes, tokens, secrets, session ids, registration and initial access tokens, API keys', async () => {
        const user = await seedUser(server);
        const iat = await initialAccessToken(server, user.workspaces[0]!.id);
        const machine = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, iat);
        const app = await registerClient(server.issuer, { client_name: 'At Rest App' });

        const agent = new UserAgent();
        const { url, verifier } = codeRequest(server.issuer, app.client_id, { scope: 'openid api profile' });
        const callback = await authorize(agent, url, server.origin, { email: user.email, password: user.password });
        const code = callback.searchParams.get('code')!;
        const exchanged = await exchangeCode(server.issuer, app, code, verifier);
        expect(exchanged.status).to.equal(200);
        const tokens = await exchanged.json() as { access_token: string; refresh_token: string; id_token: string };
        const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(app) });
        expect(refreshed.status).to.equal(200);
        const rotated = await refreshed.json() as { access_token: string; refresh_token: string };
        const machineToken = await tokenRequest(server.issuer, { grant_type: 'client_credentials', ...postCredentials(machine) });
        expect(machineToken.status).to.equal(200);
        const apiKey = await createApiKey(server, user.workspaces[0]!.id, { name: 'At Rest key' });
        expect((await api(server, '/rest/companies', { credential: apiKey.key })).status).to.equal(200);

        const credentials: Record<string, string> = {
          'initial access token': iat,
          'initial access token secret': iat.split('.').pop()!,
          'client secret': machine.client_secret!,
          'other client secret': app.client_secret!,
          'registration access token': machine.registration_access_token,
          'other registration access token': app.registration_access_token,
          'authorization code': code,
          'refresh token': tokens.refresh_token,
          'rotated refresh token': rotated.refresh_token,
          'access token': tokens.access_token,
          'client credentials access token': ((await machineToken.json()) as { access_token: string }).access_token,
          'ID token': tokens.id_token,
          'API key': apiKey.key,
          'API key secret part': apiKey.key.slice(8),
          ...Object.fromEntries(agent.cookieValues().filter((value) => value.length >= 16).map((value, i) => [`cookie ${i}`, value])),
        };
        expect(Object.keys(credentials).filter((name) => name.startsWith('cookie')), 'the browser session cookies').to.not.be.empty;

        const bytes = await contents();
        expect(bytes, 'the reader sees the stored records (client ids are public)').to.include(app.client_id);
        expect(bytes, 'and the API key\'s record').to.include(apiKey.id);
        for (const [name, value] of Object.entries(credentials)) {
          expect(bytes.includes(value), `${name} found in the store`).to.equal(false);
        }
      });

      it('holds nothing of a record created under an Idempotency-Key and deleted since that a guess could be checked against', async () => {
        const owner = await seedUser(server, [{ workspace: 'Keyed Creates', role: 'admin' }]);
        const { key } = await createApiKey(server, owner.workspaces[0]!.id);
        const person = { firstName: 'Zoe', lastName: 'Quinn', email: 'zoe.quinn@example.com' };
        const made = await api<{ data: { person: { id: string } } }>(server, '/rest/people', { credential: key, json: person, headers: { 'idempotency-key': 'kept-a-day' } });
        expect(made.status).to.equal(201);
        expect((await api(server, `/rest/people/${made.body.data.person.id}`, { method: 'DELETE', credential: key })).status).to.equal(200);

        // What one could compute from a guess at the body, or at the key and the credential.
        const asked = JSON.stringify(['people', Object.entries(person).sort(([a], [b]) => (a < b ? -1 : 1))]);
        const held = await contents();
        for (const guess of [hash('sha256', asked, 'base64url'), hash('sha256', asked, 'hex')]) expect(held).to.not.include(guess);
        // The entry is still there, keyed: the retry is told the record was deleted, not made again.
        const again = await api<{ error: string }>(server, '/rest/people', { credential: key, json: person, headers: { 'idempotency-key': 'kept-a-day' } });
        expect([again.status, again.body.error]).to.deep.equal([409, 'record_deleted']);
      });

      it('holds no pushed request_uri while its sign-in is under way (the interaction names the pushed request)', async () => {
        const app = await registerClient(server.issuer, { client_name: 'At Rest PAR App' });
        const { params } = codeRequest(server.issuer, app.client_id);
        const pushed = await fetch(`${server.issuer}/oauth/par`, {
          method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ ...params, ...postCredentials(app) }),
        });
        expect(pushed.status).to.equal(201);
        const { request_uri: requestUri } = await pushed.json() as { request_uri: string };
        const agent = new UserAgent();
        const { url, response } = await agent.follow(`${server.issuer}/oauth/authorize?${new URLSearchParams({ client_id: app.client_id, request_uri: requestUri })}`, server.origin);
        expect(response.status, 'the sign-in page is showing').to.equal(200);
        expect(new URL(url).pathname).to.match(/^\/interaction\//);

        const reference = requestUri.split(':').pop()!;
        expect(reference).to.have.length.greaterThan(15);
        expect((await contents()).includes(reference), 'the request_uri\'s reference found in the store').to.equal(false);
      });

      // The embedded store counts in process (nothing of a count is in its file): Redis keeps them.
      if (backend.name === 'Redis') it('holds nothing computable from a guess at what was typed at sign-in, a password typed as the email included', async () => {
        const app = await registerClient(server.issuer, { client_name: 'At Rest Sign-in App' });
        const agent = new UserAgent();
        const { response } = await agent.follow(codeRequest(server.issuer, app.client_id).url, server.origin);
        const html = await response.text();
        const typed = `Summer-${Date.now()}@guessable.example`;
        const failed = await agent.request(new URL(formAction(html)!, server.origin).href, { form: { csrf: field(html, 'csrf')!, email: typed, password: 'not the password' } });
        expect(failed.status).to.equal(400);

        const bytes = await contents();
        expect(bytes, 'the failure is counted in the store').to.match(/login-failures/);
        for (const guess of [typed, typed.toLowerCase()]) {
          for (const encoding of ['base64url', 'hex', 'base64'] as const) {
            const digest = hash('sha256', guess, encoding);
            expect(bytes.includes(digest.slice(0, 16)), `its SHA-256 (${encoding}) found in the store`).to.equal(false);
          }
          expect(bytes.includes(guess), 'the typed text found in the store').to.equal(false);
        }
      });

      it('holds the signing and cookie keys only sealed', async () => {
        for (const name of ['signing_jwks', 'cookie_keys']) {
          const value = await storedSetting(server, name);
          expect(value, name).to.match(/^kek1\./);
          expect(value).to.not.include('"d"');
        }
      });
    });
  }

  describe('with the embedded default key-encryption key', () => {
    let server: TestServer;
    let copy: string;

    before(async () => {
      server = await startServer();
      copy = await mkdtemp(join(tmpdir(), 'oauth-copy-'));
    });

    after(async () => {
      await server?.stop();
      await rm(copy, { recursive: true, force: true });
    });

    it('keeps the key-encryption key outside the data directory, in an owner-only file under the user\'s config directory, and logs where (never the key)', async () => {
      const keyFile = join(server.home, '.config', 'workspace-oauth-server', 'key-encryption.key');
      expect((await stat(keyFile)).mode & 0o777).to.equal(0o600);
      expect((await stat(dirname(keyFile))).mode & 0o777).to.equal(0o700);
      const key = (await readFile(keyFile, 'utf8')).trim();
      expect(key).to.match(/^[A-Za-z0-9_-]{43}$/);
      expect((await storeBytes(server)).includes(key)).to.equal(false);

      const dataDirectory = dirname(sqliteFile(server.store)!);
      expect(await readdir(dataDirectory), 'the data directory holds the database and nothing else').to.satisfy((names: string[]) => names.every((name) => name.startsWith('oauth.sqlite')));
      const created = server.logs().split('\n').filter((line) => line.includes('created the key-encryption key'));
      expect(created).to.have.length(1);
      expect(JSON.parse(created[0]!)).to.include({ file: keyFile });
      expect(server.logs()).to.not.contain(key);
    });

    it('a copy of the data directory alone does not open the stored keys: the service refuses to start on it', async () => {
      const database = sqliteFile(server.store)!;
      await mkdir(join(copy, 'data'));
      for (const suffix of ['', '-wal']) await copyFile(`${database}${suffix}`, join(copy, 'data', `oauth.sqlite${suffix}`));
      const startOnTheCopy = () => spawnSync(process.execPath, ['src/main.ts'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', HOME: join(copy, 'home'), STORE: `sqlite:${join(copy, 'data', 'oauth.sqlite')}`, PORT: '0', HOST: '127.0.0.1', METRICS: 'off' },
        encoding: 'utf8',
        timeout: 20_000,
      });
      const result = startOnTheCopy();
      expect(result.status, result.stderr).to.equal(1);
      expect(result.stderr).to.match(/configuration error: a stored value was sealed with a key-encryption key that is not configured/).and.not.match(/\n\s+at /);
      // The key file was missing, and this start made one: the message says so, and where the right one goes.
      const madeNow = join(copy, 'home', '.config', 'workspace-oauth-server', 'key-encryption.key');
      expect(result.stderr).to.contain(`${madeNow} did not exist, so this start made a new key there; put the key that sealed the store in its place`);
      // Started again the same way, the key made then is read: the refusal says where it was read.
      const again = startOnTheCopy();
      expect(again.status, again.stderr).to.equal(1);
      expect(again.stderr).to.contain(`the key in use is from the key file ${madeNow}, which did not seal it`);
    });
  });

  describe('with a key-encryption key an earlier version made beside the database', () => {
    let dir: string;
    let server: TestServer;

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'oauth-legacy-'));
      await mkdir(join(dir, 'data'), { mode: 0o700 });
      await writeFile(join(dir, 'data', 'oauth.kek'), `${KEY_A}\n`, { mode: 0o600 });
      server = await startServer({ store: `sqlite:${join(dir, 'data', 'oauth.sqlite')}` });
    });

    after(async () => {
      await server?.stop();
      await rm(dir, { recursive: true, force: true });
    });

    it('still seals with it, across restarts, and warns at each start to move it out of the data directory', async () => {
      const legacy = join(dir, 'data', 'oauth.kek');
      const warnings = () => server.logs().split('\n').filter((line) => line.includes('the key-encryption key is kept beside the database'));
      expect(warnings()).to.have.length(1);
      expect(JSON.parse(warnings()[0]!)).to.include({ level: 'warn', file: legacy });
      expect(new KeyRing(Buffer.from(KEY_A, 'base64url')).open((await storedSetting(server, 'signing_jwks'))!)).to.contain('"d"');
      expect(server.logs()).to.not.contain('created the key-encryption key');
      let made = true;
      await stat(join(server.home, '.config', 'workspace-oauth-server', 'key-encryption.key')).catch(() => { made = false; });
      expect(made, 'no new key file was made').to.equal(false);

      await server.restart();
      expect(warnings()).to.have.length(2);
      expect((await fetch(`${server.origin}/readyz`)).status).to.equal(200);
    });
  });

  describe('the SQLite files on disk', () => {
    let server: TestServer;

    before(async () => {
      server = await startServer();
    });

    after(async () => {
      await server?.stop();
    });

    const modes = async () => {
      const database = sqliteFile(server.store)!;
      const paths = [dirname(database), database, `${database}-wal`, `${database}-shm`];
      return Promise.all(paths.map(async (path) => (await stat(path)).mode & 0o777));
    };

    it('are owner-only: the data directory 0700, the database and its -wal and -shm 0600', async () => {
      // A write, so the write-ahead log has content (the keys were written at start).
      await seedUser(server);
      expect(await modes()).to.deep.equal([0o700, 0o600, 0o600, 0o600]);
    });

    /** What SQLite does by itself as the WAL grows, and what a backup tool may do before copying. */
    const checkpoint = () => {
      const db = new DatabaseSync(sqliteFile(server.store)!);
      try {
        db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
      } finally {
        db.close();
      }
    };
    const inDatabase = async (value: string) => (await readFile(sqliteFile(server.store)!)).includes(value);

    it('keep no trace of a deleted record in the database once its deletion is checkpointed', async () => {
      const owner = await seedUser(server, [{ workspace: 'Erased Co', role: 'admin' }]);
      const { key } = await createApiKey(server, owner.workspaces[0]!.id);
      const email = 'erased.person@example.com';
      const made = await api<{ data: { person: { id: string } } }>(server, '/rest/people', { credential: key, json: { firstName: 'Erased', lastName: 'Person', email } });
      expect(made.status).to.equal(201);
      checkpoint();
      expect(await inDatabase(email), 'the record is in the file').to.equal(true);

      expect((await api(server, `/rest/people/${made.body.data.person.id}`, { method: 'DELETE', credential: key })).status).to.equal(200);
      checkpoint();
      expect(await inDatabase(email), 'the deleted record\'s bytes').to.equal(false);
    });

    it('keep no trace of a deleted workspace\'s records, whole pages of them freed at once', async () => {
      const owner = await seedUser(server, [{ workspace: 'Closed Co', role: 'admin' }]);
      const workspace = owner.workspaces[0]!.id;
      const { key } = await createApiKey(server, workspace);
      const emails = Array.from({ length: 120 }, (_, i) => `closed.person.${i}@example.com`);
      for (const [i, email] of emails.entries()) {
        const made = await api(server, '/rest/people', { credential: key, json: { firstName: `Closed ${i}`, lastName: 'Person'.repeat(20), email } });
        expect(made.status).to.equal(201);
      }
      checkpoint();
      expect(await inDatabase(emails[60]!), 'the records are in the file').to.equal(true);

      expect((await server.admin(['workspace', 'delete', '--workspace', workspace])).code).to.equal(0);
      checkpoint();
      const left = [];
      for (const email of emails) if (await inDatabase(email)) left.push(email);
      expect(left, 'records whose bytes are left').to.deep.equal([]);
    });

    it('made owner-only again at start when they were left readable by others, with a warning; a shared directory is only warned about', async () => {
      const database = sqliteFile(server.store)!;
      // Another process with the database open, so the -wal and -shm outlive the restart (the last to close removes them).
      const other = openStore(server.store);
      try {
        for (const file of [database, `${database}-wal`, `${database}-shm`]) await chmod(file, 0o644);
        await chmod(dirname(database), 0o755);
        await server.restart();
        expect(await modes()).to.deep.equal([0o755, 0o600, 0o600, 0o600]);
      } finally {
        await other.close();
      }
      const tightened = server.logs().split('\n').filter((line) => line.includes('made a database file owner-only'));
      expect(tightened.map((line) => (JSON.parse(line) as { file: string }).file)).to.have.members([database, `${database}-wal`, `${database}-shm`]);
      expect(server.logs()).to.contain('the database\'s directory can be listed by other users');
    });
  });

  describe('key-encryption key rotation', () => {
    let server: TestServer;

    after(async () => {
      await server?.stop();
    });

    it('keeps every key and token working when the key is rotated, and re-seals the keys with the new one', async () => {
      server = await startServer({ env: { KEY_ENCRYPTION_KEY: KEY_A } });
      const user = await seedUser(server);
      const machine = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
      const issued = await tokenRequest(server.issuer, { grant_type: 'client_credentials', ...postCredentials(machine) });
      const { access_token: accessToken } = await issued.json() as { access_token: string };
      const sealedWithA = await storedSetting(server, 'signing_jwks');

      server.env.KEY_ENCRYPTION_KEY = KEY_B;
      server.env.KEY_ENCRYPTION_KEY_PREVIOUS = KEY_A;
      await server.restart();
      const sealedWithB = await storedSetting(server, 'signing_jwks');
      expect(sealedWithB).to.match(/^kek1\./).and.not.equal(sealedWithA);
      expect(sealedWithB!.split('.')[1], 'sealed under another key id').to.not.equal(sealedWithA!.split('.')[1]);

      delete server.env.KEY_ENCRYPTION_KEY_PREVIOUS;
      await server.restart();
      const introspection = await fetch(`${server.issuer}/oauth/introspect`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: accessToken, ...postCredentials(machine) }).toString(),
      });
      expect(await introspection.json(), 'a token signed before the rotation').to.include({ active: true });
    });

    it('refuses to start without the key the stored keys are sealed with, and says which variable to set', async () => {
      server.env.KEY_ENCRYPTION_KEY = Buffer.alloc(32, 3).toString('base64url');
      let error: unknown;
      try {
        await server.restart();
      } catch (caught) {
        error = caught;
      }
      expect(String(error)).to.contain('KEY_ENCRYPTION_KEY_PREVIOUS').and.not.contain('    at ');
      server.env.KEY_ENCRYPTION_KEY = KEY_B;
      await server.restart();
    });

    it('takes a browser session sealed under a key since dropped for an ended one: the browser signs in again', async () => {
      const [keyC, keyD] = [Buffer.alloc(32, 12), Buffer.alloc(32, 13)].map((key) => key.toString('base64url'));
      server.env.KEY_ENCRYPTION_KEY = keyC;
      server.env.KEY_ENCRYPTION_KEY_PREVIOUS = KEY_B;
      await server.restart();
      const user = await seedUser(server);
      const client = await registerClient(server.issuer, { client_name: 'Session App' });
      const agent = new UserAgent();
      const signedIn = await authorize(agent, codeRequest(server.issuer, client.client_id).url, server.origin, { email: user.email, password: user.password });
      expect(signedIn.searchParams.get('code'), signedIn.href).to.be.a('string');

      server.env.KEY_ENCRYPTION_KEY = keyD;
      server.env.KEY_ENCRYPTION_KEY_PREVIOUS = keyC;
      await server.restart();
      delete server.env.KEY_ENCRYPTION_KEY_PREVIOUS;
      await server.restart();
      const again = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
      expect(again.response.status, again.url).to.equal(200);
      expect(await again.response.text()).to.contain('<h1>Sign in</h1>');
      const signedInAgain = await authorize(agent, codeRequest(server.issuer, client.client_id).url, server.origin, { email: user.email, password: user.password });
      expect(signedInAgain.searchParams.get('code'), signedInAgain.href).to.be.a('string');
    });

    it('makes a create retried across the rotation once: its Idempotency-Key is found under the key it was kept with', async () => {
      const rotated = await startServer({ env: { KEY_ENCRYPTION_KEY: KEY_A } });
      try {
        const owner = await seedUser(rotated, [{ workspace: 'Rotated Creates', role: 'admin' }]);
        const { key } = await createApiKey(rotated, owner.workspaces[0]!.id);
        const create = () => api<{ data: { company: { id: string } } }>(rotated, '/rest/companies', { credential: key, json: { name: 'Across the rotation' }, headers: { 'idempotency-key': 'rotation-1' } });
        const first = await create();
        expect(first.status).to.equal(201);

        rotated.env.KEY_ENCRYPTION_KEY = KEY_B;
        rotated.env.KEY_ENCRYPTION_KEY_PREVIOUS = KEY_A;
        await rotated.restart();
        const retried = await create();
        expect(retried.status).to.equal(201);
        expect(retried.headers.get('idempotent-replayed')).to.equal('true');
        expect(retried.body.data.company.id).to.equal(first.body.data.company.id);
      } finally {
        await rotated.stop();
      }
    });
  });
});
