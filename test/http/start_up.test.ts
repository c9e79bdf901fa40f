import { execFile, execFileSync, spawn } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { expect } from 'chai';

import { registerClient, tokenRequest, postCredentials } from '../support/oauth.ts';
import { redisCli, startRedis, type RedisServer } from '../support/redis.ts';
import { freePort, registerVettedClient, runUntilExit, startOnHeldPort, startServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/wait.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);
const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64url');
/** A stack frame, as a stack trace in a log or an answer would show one. */
const STACK_FRAME = /\bat .+\.(ts|js):\d+/;

/** The probes and an ordinary request while the store has not answered yet. */
async function expectStarting(server: TestServer): Promise<void> {
  expect((await fetch(`${server.origin}/healthz`)).status, 'alive').to.equal(200);
  const readiness = await fetch(`${server.origin}/readyz`);
  expect(readiness.status).to.equal(503);
  expect(await readiness.json()).to.deep.include({ status: 'not ready', store: 'unavailable', keys: 'missing', error: 'temporarily_unavailable' })
    .and.have.property('error_description').that.contains('Redis store');

  const discovery = await fetch(`${server.origin}/.well-known/oauth-authorization-server`);
  expect(discovery.status).to.equal(503);
  expect(discovery.headers.get('retry-after')).to.match(/^\d+$/);
  const body = await discovery.json() as Record<string, string>;
  expect(body).to.include({ error: 'temporarily_unavailable', request_id: discovery.headers.get('x-request-id') });
  expect(body.error_description).to.contain('starting');

  const registration = await fetch(`${server.issuer}/oauth/register`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'Too Early', redirect_uris: ['http://127.0.0.1:9/cb'] }),
  });
  expect(registration.status).to.equal(503);
  expect(await registration.json()).to.include({ error: 'temporarily_unavailable' });
}

/** The warnings the service logged while it waited for the store. */
function waitWarnings(server: TestServer): Array<Record<string, unknown>> {
  return server.logs().split('\n').filter((line) => line.includes('does not answer yet')).map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('a store that does not answer at start', function () {
  this.timeout(90_000);

  describe('Redis not running yet', () => {
    let redis: RedisServer;
    let server: TestServer;

    before(async () => {
      // A port of its own for Redis, started only once the service runs.
      redis = await startRedis();
      await redis.down();
      server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY }, until: 'listening' });
    });

    after(async () => {
      await server?.stop();
      await redis?.stop();
    });

    it('listens: /healthz 200, /readyz 503 naming the store, every other request 503 with Retry-After, and retries', async () => {
      await expectStarting(server);
      await eventually('a first try failed', () => waitWarnings(server).length > 0, 10_000);
    });

    it('becomes ready by itself once Redis answers, and serves discovery, registration and tokens', async () => {
      await redis.up();
      await eventually('/readyz answers 200', async () => (await fetch(`${server.origin}/readyz`)).status === 200, 30_000, 200);
      expect(await (await fetch(`${server.origin}/readyz`)).json()).to.deep.equal({ status: 'ready', store: 'ok', keys: 'loaded' });

      const discovery = await fetch(`${server.origin}/.well-known/oauth-authorization-server`);
      expect(discovery.status).to.equal(200);
      expect((await discovery.json() as { issuer: string }).issuer).to.equal(server.issuer);
      expect((await registerClient(server.issuer, { client_name: 'After Start' })).client_id).to.be.a('string');
      const machine = await registerVettedClient(server, { client_name: 'Sync Job', grant_types: ['client_credentials'], redirect_uris: [] });
      const token = await tokenRequest(server.issuer, { grant_type: 'client_credentials', ...postCredentials(machine) });
      expect(token.status).to.equal(200);
      expect(await token.json()).to.have.property('access_token').that.is.a('string');
    });

    it('logged one warning a try, without a stack, then that the store answers', () => {
      const warnings = waitWarnings(server);
      expect(warnings.length).to.be.at.least(1);
      expect(warnings[0]).to.include({ level: 'warn', attempt: 1, retry_in_ms: 500 });
      expect(warnings[0]!.reason).to.contain('ECONNREFUSED');
      expect(server.logs()).to.contain('the Redis store answers; serving');
      expect(server.logs()).to.not.match(STACK_FRAME).and.not.contain('"stack"');
    });
  });

  describe('a Redis URL that refuses connections', () => {
    let server: TestServer;

    before(async () => {
      server = await startServer({ store: `redis://127.0.0.1:${await freePort()}`, env: { KEY_ENCRYPTION_KEY }, until: 'listening' });
    });

    after(async () => {
      await server?.stop();
    });

    it('stays up and retries, each pause longer than the last, with no stack trace', async () => {
      await expectStarting(server);
      const warnings = await eventually('three tries', () => (waitWarnings(server).length >= 3 ? waitWarnings(server) : undefined), 30_000);
      expect(warnings.slice(0, 3).map(({ attempt, retry_in_ms: pause }) => [attempt, pause])).to.deep.equal([[1, 500], [2, 1000], [3, 2000]]);
      expect(server.logs()).to.not.match(STACK_FRAME).and.not.contain('"stack"');
    });

    it('stops on SIGTERM while it waits', async () => {
      const pid = server.pid()!;
      await server.stop();
      expect(() => process.kill(pid, 0), 'the process is gone').to.throw();
      expect(server.logs()).to.contain('"message":"stopping"');
    });
  });

  describe('a rediss:// URL to a Redis that speaks no TLS', () => {
    let redis: RedisServer;
    let server: TestServer;

    before(async () => {
      redis = await startRedis();
      server = await startServer({ store: redis.url.replace(/^redis:/, 'rediss:'), env: { KEY_ENCRYPTION_KEY }, until: 'listening' });
    });

    after(async () => {
      await server?.stop();
      await redis?.stop();
    });

    it('says in every warning why it cannot reach it, and nothing outside the JSON log (no TLS warning for an IP address)', async () => {
      await expectStarting(server);
      const warnings = await eventually('two tries', () => (waitWarnings(server).length >= 2 ? waitWarnings(server) : undefined), 30_000);
      for (const { reason } of warnings) expect(reason).to.match(/^Redis is not reachable: \S/);
      const plain = server.logs().split('\n').filter((line) => line.trim() && !line.startsWith('{'));
      expect(plain, server.logs()).to.deep.equal([]);
    });
  });

  describe('with WORKERS=2 and Redis not running yet', () => {
    let redis: RedisServer;
    let server: TestServer;

    before(async () => {
      redis = await startRedis();
      await redis.down();
      server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY, WORKERS: '2' }, until: 'listening' });
    });

    after(async () => {
      await server?.stop();
      await redis?.stop();
    });

    it('starts the workers, which answer the probes, and each becomes ready once Redis answers', async () => {
      await expectStarting(server);
      expect(server.logs()).to.contain('the workers start and wait for it');
      await redis.up();
      // Each request on a new connection, so that both workers are asked (node:cluster hands connections out in turn).
      await eventually('both workers ready', async () => {
        for (let i = 0; i < 4; i += 1) {
          if ((await fetch(`${server.origin}/readyz`, { headers: { connection: 'close' } })).status !== 200) return false;
        }
        return true;
      }, 30_000, 200);
      expect(server.logs()).to.not.match(STACK_FRAME).and.not.contain('"stack"');
    });
  });

  it('still stops at once, in one line, when Redis is given no key-encryption key', async () => {
    const { code, stderr } = await runUntilExit({ STORE: `redis://127.0.0.1:${await freePort()}`, PORT: '0', METRICS_PORT: '0', LOG_LEVEL: 'silent' });
    expect(code).to.equal(1);
    expect(stderr.trim().split('\n')).to.have.length(1);
    expect(stderr).to.match(/^configuration error: .*KEY_ENCRYPTION_KEY/);
  });
});

describe('a SQLite store that cannot be opened', function () {
  this.timeout(30_000);

  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oauth-unopenable-'));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const start = (path: string) => runUntilExit({ STORE: `sqlite:${path}`, HOME: join(dir, 'home'), PORT: '0', METRICS_PORT: '0', LOG_LEVEL: 'silent' });

  it('is a configuration error: exit 1 and one line naming STORE, when its directory cannot be made', async () => {
    const file = join(dir, 'a-file');
    await writeFile(file, 'not a directory');
    const { code, stderr } = await start(join(file, 'oauth.sqlite'));
    expect(code).to.equal(1);
    expect(stderr.trim()).to.match(/^configuration error: STORE: the SQLite database .*a-file\/oauth\.sqlite cannot be opened: .*a-file'$/);
    expect(stderr.trim().split('\n')).to.have.length(1);
  });

  it('leaves no key-encryption key behind that the failed start made for it (alone or as WORKERS\' supervisor)', async () => {
    const file = join(dir, 'not-a-directory');
    await writeFile(file, 'not a directory');
    for (const workers of ['1', '2']) {
      const home = join(dir, `home-of-a-failed-start-${workers}`);
      const { code, stderr } = await runUntilExit({
        STORE: `sqlite:${join(file, 'oauth.sqlite')}`, HOME: home, PORT: '0', METRICS_PORT: '0', WORKERS: workers, LOG_LEVEL: 'silent',
      });
      expect([code, stderr.trim().split('\n').length], stderr).to.deep.equal([1, 1]);
      expect(stderr).to.match(/^configuration error: STORE: /);
      const keyFile = join(home, '.config', 'workspace-oauth-server', 'key-encryption.key');
      expect(await stat(keyFile).then(() => 'there', () => 'gone'), `WORKERS=${workers}: ${keyFile}`).to.equal('gone');
    }
  });

  it('keeps a key-encryption key that was there before a start that fails on its store', async () => {
    const home = join(dir, 'home-with-a-key');
    const keyFile = join(home, '.config', 'workspace-oauth-server', 'key-encryption.key');
    await mkdir(join(home, '.config', 'workspace-oauth-server'), { recursive: true, mode: 0o700 });
    await writeFile(keyFile, `${Buffer.alloc(32, 3).toString('base64url')}\n`, { mode: 0o600 });
    const { code } = await runUntilExit({ STORE: 'sqlite:/proc/no-such-directory/oauth.sqlite', HOME: home, PORT: '0', METRICS_PORT: '0', LOG_LEVEL: 'silent' });
    expect(code).to.equal(1);
    expect((await stat(keyFile)).isFile(), 'the key of before').to.equal(true);
  });

  it('is a configuration error, not a hang, when the filesystem refuses its directory although the parent exists (procfs)', async () => {
    const { code, stderr } = await start('/proc/no-such-directory/oauth.sqlite');
    expect(code).to.equal(1);
    expect(stderr.trim()).to.match(/^configuration error: STORE: the SQLite database \/proc\/no-such-directory\/oauth\.sqlite cannot be opened: ENOENT/);
  });

  it('is a configuration error when STORE names a directory, whose mode is left as it was', async () => {
    const directory = join(dir, 'a-directory');
    await mkdir(directory, { mode: 0o755 });
    await chmod(directory, 0o755);
    const { code, stderr } = await start(directory);
    expect(code).to.equal(1);
    expect(stderr.trim()).to.match(/^configuration error: STORE: the SQLite database .*a-directory cannot be opened/);
    expect((await stat(directory)).mode & 0o777, 'not made owner-only').to.equal(0o755);
  });

  it('is a configuration error when the file is not a database, whose mode is left as it was', async () => {
    const file = join(dir, 'garbage.sqlite');
    await writeFile(file, 'this is not a SQLite database, only text long enough to be read as a header'.repeat(20), { mode: 0o644 });
    await chmod(file, 0o644);
    const { code, stderr } = await start(file);
    expect(code).to.equal(1);
    expect(stderr.trim()).to.match(/^configuration error: STORE: the SQLite database .*garbage\.sqlite cannot be opened: .*not a database/);
    expect(stderr.trim().split('\n')).to.have.length(1);
    expect((await stat(file)).mode & 0o777, 'not the service\'s file: not made owner-only').to.equal(0o644);
  });
});

describe('a Redis database number the server does not have', function () {
  this.timeout(30_000);

  let redis: RedisServer;

  before(async () => {
    redis = await startRedis(['--databases', '2']);
  });

  after(async () => {
    await redis?.stop();
  });

  it('is a configuration error naming STORE, and nothing is written to database 0 instead', async () => {
    const { code, stderr } = await runUntilExit({ STORE: `redis://127.0.0.1:${redis.port}/5`, KEY_ENCRYPTION_KEY, PORT: '0', METRICS: 'off', LOG_LEVEL: 'silent' });
    expect(code).to.equal(1);
    expect(stderr.trim()).to.match(/^configuration error: STORE: Redis has no database of the number the URL names \(ERR DB index is out of range\)/);
    expect(stderr.trim().split('\n')).to.have.length(1);
    expect(await redisCli(redis.port, 'DBSIZE'), 'database 0 left empty').to.equal('0');
  });
});

describe('WORKERS=2 with a configuration error', function () {
  this.timeout(60_000);

  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oauth-workers-'));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('says it once and stops every worker instead of replacing them (the port is held)', async () => {
    // One SQLite file: the workers read the keys the supervisor made rather than each making its own.
    const { port, code, stderr } = await startOnHeldPort((held) => ({
      PORT: String(held), METRICS_PORT: '0', WORKERS: '2', LOG_LEVEL: 'silent', STORE: `sqlite:${join(dir, 'oauth.sqlite')}`, HOME: join(dir, 'home'),
    }));
    expect(code, 'exited by itself, non-zero').to.equal(1);
    expect(stderr.trim()).to.equal(`configuration error: PORT, HOST: 127.0.0.1 port ${port} is in use by another process (EADDRINUSE)`);
  });

  it('says it once and stops every worker when HOST names a host that does not resolve', async () => {
    // A label longer than 63 characters: the resolver refuses the name without asking any server.
    const host = `${'a'.repeat(64)}.invalid`;
    const { code, stderr } = await runUntilExit({
      PORT: '0', HOST: host, METRICS: 'off', WORKERS: '2', LOG_LEVEL: 'silent', STORE: `sqlite:${join(dir, 'unresolved.sqlite')}`, HOME: join(dir, 'home'),
    });
    expect(code, 'exited by itself, non-zero').to.equal(1);
    expect(stderr.trim()).to.equal(`configuration error: PORT, HOST: ${host} port 0 names a host that does not resolve (ENOTFOUND)`);
  });
});

/** A Node.js older than the service needs: the machine's /usr/bin/node (Debian's), or OLDER_NODE. */
function olderNode(): string {
  const node = process.env.OLDER_NODE ?? '/usr/bin/node';
  let version: string;
  try {
    version = execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`these tests run the entry points under a Node.js older than 24; none at ${node} (set OLDER_NODE)`);
  }
  if (Number(version.split('.')[0]) >= 24) throw new Error(`${node} is Node.js ${version}; these tests need one older than 24 (set OLDER_NODE)`);
  return node;
}

describe('the entry points on a Node.js older than 24', function () {
  this.timeout(60_000);

  let node: string;

  before(() => {
    node = olderNode();
  });

  for (const [script, entry] of [['npm start', 'bin/start.js'], ['npm run admin', 'bin/admin.js']] as const) {
    it(`${script} (${entry}) says in one line that Node.js 24 is needed, and exits 1`, async () => {
      const { code, stderr } = await runUntilExit({}, { node, entry });
      expect(code).to.equal(1);
      const version = execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
      expect(stderr).to.equal(`this service needs Node.js 24 or later; this is Node.js ${version} (${await realpath(node)}). See README.md, "Run it".\n`);
    });
  }

  it('npm ci refuses to install (engine-strict in .npmrc)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oauth-npm-'));
    try {
      for (const file of ['package.json', 'package-lock.json', '.npmrc']) await copyFile(join(ROOT, file), join(dir, file));
      await mkdir(join(dir, 'cache'));
      // npm as the older Node.js runs it; offline, and with a cache of its own, it touches nothing outside `dir`.
      const npm = await realpath('/usr/bin/npm');
      const refused = await run(node, [npm, 'ci', '--dry-run', '--offline', '--no-audit', '--no-fund'], {
        cwd: dir, env: { PATH: process.env.PATH ?? '', HOME: dir, npm_config_cache: join(dir, 'cache') }, timeout: 30_000,
      }).then(() => undefined, (error: { code?: number; stderr?: string }) => error);
      expect(refused, 'npm ci failed').to.not.equal(undefined);
      expect(refused!.code).to.equal(1);
      expect(refused!.stderr).to.contain('EBADENGINE').and.contain('Required: {"node":">=24"}');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('on Node.js 24 the same entries run the service and the CLI', async () => {
    const { port, code, stderr } = await startOnHeldPort((held) => ({ PORT: String(held), METRICS_PORT: '0', LOG_LEVEL: 'silent' }), { entry: 'bin/start.js' });
    expect(code, 'src/main.ts ran, and refused the held port').to.equal(1);
    expect(stderr.trim()).to.equal(`configuration error: PORT, HOST: 127.0.0.1 port ${port} is in use by another process (EADDRINUSE)`);
    const { code: helpCode, stdout } = await runUntilExit({}, { entry: 'bin/admin.js', args: ['--help'] });
    expect(helpCode).to.equal(0);
    expect(stdout).to.contain('Usage: npm run admin');
  });
});

describe('PORT=0 with BASE_URL unset', function () {
  this.timeout(60_000);

  /** Starts the service on a free port of its choosing and answers the port it logged, once it serves. */
  async function startOnPickedPort(env: Record<string, string>): Promise<{ port: number; stop(): Promise<void> }> {
    const dir = await mkdtemp(join(tmpdir(), 'oauth-port0-'));
    const child = spawn(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: join(dir, 'home'), STORE: `sqlite:${join(dir, 'oauth.sqlite')}`, PORT: '0', HOST: '127.0.0.1', METRICS: 'off', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    child.stderr.on('data', (chunk: Buffer) => { log += chunk.toString(); });
    const stop = async () => {
      if (child.exitCode === null) await new Promise((resolve) => { child.once('exit', resolve); child.kill('SIGTERM'); });
      await rm(dir, { recursive: true, force: true });
    };
    try {
      const port = await eventually('the service listens and is ready', async () => {
        if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}:\n${log}`);
        const listening = log.split('\n').find((line) => line.includes('"message":"listening"'));
        if (!listening) return undefined;
        const logged = (JSON.parse(listening) as { port: number }).port;
        const ready = await fetch(`http://127.0.0.1:${logged}/readyz`).catch(() => undefined);
        return ready?.status === 200 ? logged : undefined;
      });
      return { port, stop };
    } catch (error) {
      await stop();
      throw error;
    }
  }

  for (const workers of ['1', '2']) {
    it(`names the port it was given in the issuer and discovery (WORKERS=${workers})`, async () => {
      const service = await startOnPickedPort({ WORKERS: workers });
      try {
        expect(service.port).to.be.above(0);
        const issuer = `http://localhost:${service.port}`;
        // Every worker answers alike: a few requests reach each of them.
        for (let request = 0; request < 4; request++) {
          const discovery = await (await fetch(`http://127.0.0.1:${service.port}/.well-known/openid-configuration`)).json() as Record<string, string>;
          expect(discovery.issuer).to.equal(issuer);
          expect(discovery.token_endpoint).to.equal(`${issuer}/oauth/token`);
        }
        const { jwks_uri: jwksUri } = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json() as Record<string, string>;
        const keys = await fetch(jwksUri!);
        expect(keys.status, 'the jwks_uri discovery names is reached').to.equal(200);
      } finally {
        await service.stop();
      }
    });
  }
});
