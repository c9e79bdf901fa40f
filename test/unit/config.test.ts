import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEnv } from 'node:util';

import { expect } from 'chai';

import { SCHEMA } from '../../config/schema.ts';
import { CONFIGURATION_DOCUMENT, configurationTable, withTable } from '../../config/table.ts';
import { ConfigError, loadConfig } from '../../config/index.ts';
import { misspelledSettings } from '../../config/misspelled.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function configError(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a configuration error');
}

describe('configuration', () => {
  it('defaults to http://localhost:3000 with the SQLite file under ./data/', () => {
    const config = loadConfig({});
    expect(config.issuer).to.equal('http://localhost:3000');
    expect(config.port).to.equal(3000);
    expect(config.store).to.equal('sqlite:./data/oauth.sqlite');
    expect(config.registration).to.equal('open');
    expect(config.proxyHops).to.equal(0);
    expect(config.pkceRequired).to.equal('all');
  });

  it('takes an issuer with a path and strips a trailing slash', () => {
    const config = loadConfig({ BASE_URL: 'https://id.example.com/auth/' });
    expect(config.issuer).to.equal('https://id.example.com/auth');
    expect(config.basePath).to.equal('/auth');
  });

  it('reads TRUST_PROXY as the number of proxies in front: false is none, true is one', () => {
    expect(loadConfig({ TRUST_PROXY: 'false' }).proxyHops).to.equal(0);
    expect(loadConfig({ TRUST_PROXY: 'true' }).proxyHops).to.equal(1);
    expect(loadConfig({ TRUST_PROXY: '2' }).proxyHops).to.equal(2);
    expect(configError({ TRUST_PROXY: '0x1' })).to.match(/^TRUST_PROXY must be true, false or the number of proxies/);
  });

  it('reads MCP_ALLOWED_ORIGINS as origins a browser sends, whatever the case they are written in; anything more than an origin is refused', () => {
    expect(loadConfig({ MCP_ALLOWED_ORIGINS: 'https://App.Example.com,HTTP://localhost:5173/' }).mcpAllowedOrigins).to.deep.equal(['https://app.example.com', 'http://localhost:5173']);
    for (const value of ['https://app.example.com/path', 'ftp://app.example.com', 'https://user@app.example.com']) {
      expect(configError({ MCP_ALLOWED_ORIGINS: value }), value).to.match(/^MCP_ALLOWED_ORIGINS must be origins such as/);
    }
  });

  it('reads how the pages name the service: a name, and a logo that is an https URL or a path on the issuer\'s host', () => {
    expect(loadConfig({}).service).to.deep.equal({ name: 'Workspace OAuth server', logoUrl: undefined, documentationUrl: undefined });
    const service = loadConfig({ SERVICE_NAME: ' Acme Sign-in ', SERVICE_LOGO_URL: '/brand/logo.svg?v=2', SERVICE_DOCUMENTATION_URL: 'https://docs.example.com/oauth' }).service;
    expect(service).to.deep.equal({ name: 'Acme Sign-in', logoUrl: '/brand/logo.svg?v=2', documentationUrl: 'https://docs.example.com/oauth' });
    expect(loadConfig({ SERVICE_LOGO_URL: 'https://CDN.example.com/logo.png' }).service.logoUrl).to.equal('https://cdn.example.com/logo.png');
    for (const logo of ['http://cdn.example.com/logo.png', 'javascript:alert(1)', '//cdn.example.com/logo.png', '/\\cdn.example.com/l.png', 'https://user:pw@cdn.example.com/l.png', 'https://a%3bb/l.png', 'logo.png']) {
      expect(configError({ SERVICE_LOGO_URL: logo }), logo).to.match(/^SERVICE_LOGO_URL must be an https URL .* or a path starting with \//);
    }
    expect(configError({ SERVICE_DOCUMENTATION_URL: 'http://docs.example.com' })).to.match(/^SERVICE_DOCUMENTATION_URL must be an https URL/);
    expect(configError({ SERVICE_NAME: 'x'.repeat(61) })).to.match(/^SERVICE_NAME must be 1 to 60 characters/);
    expect(configError({ SERVICE_NAME: '   ' }), 'blanks are no name').to.equal('SERVICE_NAME must name the service (1 to 60 characters), not be blank');
    expect(configError({ SERVICE_NAME: 'a\nb' })).to.match(/^SERVICE_NAME/);
  });

  it('names the variable in every refusal', () => {
    expect(configError({ PORT: 'eighty' })).to.match(/^PORT/);
    expect(configError({ BASE_URL: 'not a url' })).to.match(/^BASE_URL/);
    expect(configError({ BASE_URL: 'https://id.example.com/?x=1' })).to.match(/^BASE_URL/);
    expect(configError({ BASE_URL: 'http://id.example.com' })).to.match(/^BASE_URL must use https/);
    expect(configError({ BASE_URL: 'http://127.attacker.example' }), 'a DNS name that begins like a loopback address').to.match(/^BASE_URL must use https/);
    expect(loadConfig({ BASE_URL: 'http://127.0.0.2:8080' }).issuer, 'a loopback address').to.equal('http://127.0.0.2:8080');
    expect(configError({ STORE: 'postgres://db' })).to.match(/^STORE/);
    expect(configError({ TRUST_PROXY: 'maybe' })).to.match(/^TRUST_PROXY/);
    expect(configError({ LOG_LEVEL: 'loud' })).to.match(/^LOG_LEVEL/);
    expect(configError({ REGISTRATION: 'closed' })).to.match(/^REGISTRATION/);
    expect(configError({ PKCE_REQUIRED: 'none' })).to.match(/^PKCE_REQUIRED must be one of all, public/);
    expect(configError({ REFRESH_TOKEN_ABSOLUTE_LIFETIME: '10m' })).to.match(/^REFRESH_TOKEN_ABSOLUTE_LIFETIME must be at least 3600s/);
  });

  it('refuses a sqlite: STORE naming a directory (it would become a file of that name), and a BASE_URL on port 0 (no client reaches it)', () => {
    expect(configError({ STORE: 'sqlite:/srv/oauth/data/' })).to.equal('STORE names a directory ("sqlite:/srv/oauth/data/"); name the database file in it, such as sqlite:/srv/oauth/data/oauth.sqlite');
    expect(configError({ STORE: 'sqlite:./data/' })).to.match(/^STORE names a directory/);
    expect(loadConfig({ STORE: 'sqlite:./data/oauth.sqlite' }).store).to.equal('sqlite:./data/oauth.sqlite');
    expect(configError({ BASE_URL: 'http://localhost:0' })).to.match(/^BASE_URL must name the port clients reach the service at, not 0/);
    expect(loadConfig({ PORT: '0' }).port, 'PORT=0 still picks a free port').to.equal(0);
  });

  it('takes durations up to a century, and refuses a longer one that no date could hold', () => {
    expect(loadConfig({ KEY_RETENTION: '36500d' }).keyRotation.retentionSeconds).to.equal(36_500 * 86_400);
    for (const name of ['KEY_RETENTION', 'KEY_PREPUBLISH', 'UNUSED_CLIENT_TTL', 'REGISTRATION_ACCESS_TOKEN_TTL', 'REFRESH_TOKEN_ABSOLUTE_LIFETIME']) {
      expect(configError({ [name]: '999999999d' }), name).to.match(new RegExp(`^${name} must be a duration .*at most 36500d`));
    }
    expect(configError({ RATE_LIMIT_REGISTRATION: '10/999999999d' })).to.match(/^RATE_LIMIT_REGISTRATION/);
  });

  it('bounds refresh tokens at 365 days through every rotation unless told otherwise', () => {
    expect(loadConfig({}).refreshTokenAbsoluteLifetime).to.equal(365 * 24 * 3600);
    expect(loadConfig({ REFRESH_TOKEN_ABSOLUTE_LIFETIME: '90d' }).refreshTokenAbsoluteLifetime).to.equal(90 * 24 * 3600);
  });

  it('takes HOST and METRICS_HOST as an IP address or a host name, and refuses one with a port, one that reads as no IPv4 address, or none', () => {
    for (const [given, read] of [['localhost', 'localhost'], ['0.0.0.0', '0.0.0.0'], ['::', '::'], ['[::1]', '::1'], ['auth.internal.example', 'auth.internal.example'], [' 10.0.0.5 ', '10.0.0.5']]) {
      expect(loadConfig({ HOST: given }).host, given).to.equal(read);
      expect(loadConfig({ METRICS_HOST: given }).metrics, given).to.deep.include({ host: read });
    }
    for (const bad of ['127.0.0.1:3000', '999.1.1.1', ' ', 'a host', 'http://localhost', '[::1]:3000']) {
      expect(configError({ HOST: bad }), JSON.stringify(bad)).to.match(/^HOST must be an IP address or a host name to listen on, without a port/);
      expect(configError({ METRICS_HOST: bad }), JSON.stringify(bad)).to.match(/^METRICS_HOST must be an IP address or a host name/);
    }
  });

  it('serves metrics on a loopback listener of their own by default (port 9464), on PORT only with METRICS=public, and takes a METRICS_TOKEN without ever repeating it', () => {
    expect(loadConfig({}).metrics).to.deep.equal({ where: 'local', host: '127.0.0.1', port: 9464, token: undefined });
    expect(loadConfig({ METRICS: 'on' }).metrics, 'on, the earlier default, is local').to.deep.equal(loadConfig({}).metrics);
    expect(loadConfig({ METRICS: 'off' }).metrics).to.equal(undefined);
    expect(loadConfig({ METRICS: 'public' }).metrics).to.deep.equal({ where: 'public', token: undefined });
    expect(loadConfig({ METRICS_HOST: '10.0.0.5', METRICS_PORT: '0' }).metrics).to.deep.include({ host: '10.0.0.5', port: 0 });
    expect(loadConfig({ METRICS_TOKEN: 'Zm9vYmFyYmF6cXV4MTIzNDU2Nzg=' }).metrics).to.deep.include({ token: 'Zm9vYmFyYmF6cXV4MTIzNDU2Nzg=' });
    expect(loadConfig({ METRICS: 'public', METRICS_TOKEN: 'Zm9vYmFyYmF6cXV4MTIzNDU2Nzg=' }).metrics).to.deep.equal({ where: 'public', token: 'Zm9vYmFyYmF6cXV4MTIzNDU2Nzg=' });
    expect(configError({ METRICS: 'sometimes' })).to.match(/^METRICS must be local, public or off/);
    expect(configError({ METRICS_PORT: '3000' })).to.match(/^METRICS_PORT \(3000\) must not be PORT/);
    expect(configError({ METRICS_PORT: '99999', METRICS: 'off' })).to.match(/^METRICS_PORT must be/);
    expect(configError({ METRICS_TOKEN: 'short' })).to.match(/^METRICS_TOKEN must be 16 to 256 characters/);
    expect(configError({ METRICS_TOKEN: 'a long token with spaces in it' })).to.match(/^METRICS_TOKEN/).and.not.contain('spaces in it');
  });

  it('keeps the embedded store\'s default key-encryption key under the user\'s config directory, not beside the database', () => {
    expect(loadConfig({ STORE: 'sqlite:/srv/oauth/data/oauth.sqlite', XDG_CONFIG_HOME: '/home/ann/.cfg' }).keyEncryptionKey).to.deep.equal({
      created: '/home/ann/.cfg/workspace-oauth-server/key-encryption.key',
      besideDatabase: '/srv/oauth/data/oauth.kek',
    });
    expect(loadConfig({}).keyEncryptionKey).to.deep.include({ created: join(homedir(), '.config', 'workspace-oauth-server', 'key-encryption.key') });
    expect(loadConfig({ KEY_ENCRYPTION_KEY_FILE: '/run/secrets/kek' }).keyEncryptionKey).to.deep.equal({ file: '/run/secrets/kek' });
    expect(configError({ KEY_ENCRYPTION_KEY_FILE: '/run/secrets/kek', KEY_ENCRYPTION_KEY: 'x'.repeat(43) })).to.equal('KEY_ENCRYPTION_KEY and KEY_ENCRYPTION_KEY_FILE are both set: set one of them');
    expect(loadConfig({ STORE: 'memory:' }).keyEncryptionKey).to.equal(undefined);
    expect(loadConfig({ STORE: 'redis://127.0.0.1:6379' }).keyEncryptionKey).to.equal(undefined);
    expect(configError({ XDG_CONFIG_HOME: 'relative/dir' })).to.match(/^XDG_CONFIG_HOME must be an absolute path/);
  });

  it('accepts Redis storage URLs, and refuses a malformed one saying what is wrong without repeating its password', () => {
    for (const store of [
      'redis://127.0.0.1:6379', 'redis://:secret@cache:6380/2', 'rediss://user:pw@redis.example.com',
      'redis+sentinel://10.0.0.1:26379,10.0.0.2/mymaster', 'redis+sentinel://u:p@[::1]:26379/mymaster/1',
      'redis+cluster://10.0.0.1:7000,10.0.0.2:7001',
    ]) expect(loadConfig({ STORE: store }).store).to.equal(store);
    expect(configError({ STORE: 'redis://' })).to.match(/^STORE is not a usable Redis URL: .*needs a host/);
    expect(configError({ STORE: 'redis://h:99999' })).to.match(/port out of range/);
    expect(configError({ STORE: 'redis://h/x' })).to.match(/database number/);
    expect(configError({ STORE: 'redis://a:1,b:2' })).to.match(/names one host/);
    expect(configError({ STORE: 'redis+sentinel://h:26379' })).to.match(/master name/);
    expect(configError({ STORE: 'redis+cluster://h:1/0' })).to.match(/takes no path/);
    expect(configError({ STORE: 'redis://h?tls=1' })).to.match(/no query/);
    expect(configError({ STORE: 'redis://user:s3cret@h:1/x' })).to.not.match(/s3cret/);
    expect(configError({ STORE: 'redis://user:s3/cret@h' })).to.not.match(/s3|cret/);
    expect(configError({ STORE: 'postgres://user:s3cret@db' })).to.match(/^STORE/).and.not.match(/s3cret/);
  });

  it('reads rate limits as requests per duration, on by default, and turns them all off with RATE_LIMITS=off', () => {
    expect(loadConfig({}).rateLimits).to.deep.equal({
      registration: { points: 100, duration: 3600 },
      tokenPerClient: { points: 1200, duration: 60 },
      tokenPerAddress: { points: 1200, duration: 60 },
      loginPerAddress: { points: 50, duration: 900 },
      loginFailuresBeforeLock: 5,
      loginLock: 60,
      loginLockMax: 3600,
      dataApi: { points: 600, duration: 60 },
      failedCredentialsPerAddress: { points: 30, duration: 60 },
      interactionsPerAddress: { points: 60, duration: 600 },
      ipv6Prefix: 64,
    });
    const custom = loadConfig({
      RATE_LIMIT_REGISTRATION: '10/1d', RATE_LIMIT_DATA_API: ' 50 / 30 ', RATE_LIMIT_LOGIN_ACCOUNT: '3', RATE_LIMIT_LOGIN_LOCK: '2s', RATE_LIMIT_LOGIN_LOCK_MAX: '2s',
      RATE_LIMIT_CREDENTIAL_ADDRESS: '5/1h', RATE_LIMIT_INTERACTION_ADDRESS: '20/5m', RATE_LIMIT_IPV6_PREFIX: '56',
    }).rateLimits;
    expect(custom).to.deep.include({
      registration: { points: 10, duration: 86_400 }, dataApi: { points: 50, duration: 30 }, loginFailuresBeforeLock: 3, loginLock: 2, loginLockMax: 2,
      failedCredentialsPerAddress: { points: 5, duration: 3600 }, interactionsPerAddress: { points: 20, duration: 300 }, ipv6Prefix: 56,
    });
    expect(loadConfig({ RATE_LIMITS: 'off' }).rateLimits).to.equal(undefined);
    expect(loadConfig({ RATE_LIMITS: 'on' }).rateLimits).to.not.equal(undefined);
  });

  it('refuses a rate limit it cannot read, naming the variable, also while limits are off', () => {
    expect(configError({ RATE_LIMIT_TOKEN_CLIENT: '1200' })).to.match(/^RATE_LIMIT_TOKEN_CLIENT must be a number of requests per duration, such as 100\/1h/);
    expect(configError({ RATE_LIMIT_TOKEN_ADDRESS: '0/1m' })).to.match(/^RATE_LIMIT_TOKEN_ADDRESS/);
    expect(configError({ RATE_LIMIT_REGISTRATION: '10/1w' })).to.match(/^RATE_LIMIT_REGISTRATION/);
    expect(configError({ RATE_LIMIT_LOGIN_ADDRESS: 'many/1h', RATE_LIMITS: 'off' })).to.match(/^RATE_LIMIT_LOGIN_ADDRESS/);
    expect(configError({ RATE_LIMIT_LOGIN_ACCOUNT: '0' })).to.match(/^RATE_LIMIT_LOGIN_ACCOUNT must be a whole number above 0/);
    expect(configError({ RATE_LIMIT_LOGIN_LOCK: 'soon' })).to.match(/^RATE_LIMIT_LOGIN_LOCK must be a duration/);
    expect(configError({ RATE_LIMIT_LOGIN_LOCK: '1h', RATE_LIMIT_LOGIN_LOCK_MAX: '1m' })).to.match(/^RATE_LIMIT_LOGIN_LOCK_MAX \(60s\) must not be shorter than RATE_LIMIT_LOGIN_LOCK \(3600s\)/);
    expect(configError({ RATE_LIMITS: 'sometimes' })).to.match(/^RATE_LIMITS must be on or off/);
    expect(configError({ RATE_LIMIT_CREDENTIAL_ADDRESS: '30' })).to.match(/^RATE_LIMIT_CREDENTIAL_ADDRESS must be a number of requests per duration/);
    expect(configError({ RATE_LIMIT_INTERACTION_ADDRESS: '0/10m' })).to.match(/^RATE_LIMIT_INTERACTION_ADDRESS/);
    for (const prefix of ['31', '129', '0', '64.5', '/64', 'sixty-four']) {
      expect(configError({ RATE_LIMIT_IPV6_PREFIX: prefix }), prefix).to.match(/^RATE_LIMIT_IPV6_PREFIX must be a prefix length from 32 to 128/);
    }
    expect(loadConfig({ RATE_LIMIT_IPV6_PREFIX: '128' }).rateLimits?.ipv6Prefix).to.equal(128);
  });

  it('counts a rate limit over at most 24 days, and locks a sign-in for at most that long (the in-process limiter ends each with a timer)', () => {
    expect(loadConfig({ RATE_LIMIT_REGISTRATION: '2/24d', RATE_LIMIT_LOGIN_LOCK: '24d', RATE_LIMIT_LOGIN_LOCK_MAX: '24d' }).rateLimits)
      .to.deep.include({ registration: { points: 2, duration: 24 * 86_400 }, loginLock: 24 * 86_400, loginLockMax: 24 * 86_400 });
    expect(configError({ RATE_LIMIT_REGISTRATION: '2/30d' })).to.match(/^RATE_LIMIT_REGISTRATION must be a number of requests per duration.*at most 24d/);
    expect(configError({ RATE_LIMIT_DATA_API: '100/2592000' })).to.match(/^RATE_LIMIT_DATA_API .*at most 24d/);
    expect(configError({ RATE_LIMIT_LOGIN_LOCK: '30d', RATE_LIMIT_LOGIN_LOCK_MAX: '30d' })).to.match(/^RATE_LIMIT_LOGIN_LOCK must be a duration .*at most 24d/);
    expect(configError({ RATE_LIMIT_LOGIN_LOCK_MAX: '25d' })).to.match(/^RATE_LIMIT_LOGIN_LOCK_MAX must be a duration .*at most 24d/);
  });

  it('reads on, off and auto in any case, and a number of days written as .5 or 1.', () => {
    expect(loadConfig({ UNUSED_CLIENT_TTL: 'OFF' }).unusedClientTtl).to.equal(undefined);
    expect(configError({ UNUSED_CLIENT_TTL: 'forever' }), 'a refusal says off is taken').to.match(/^UNUSED_CLIENT_TTL must be a duration .*, got "forever"; it may also be off$/);
    expect(loadConfig({ UNUSED_CLIENT_TTL: 'Off' }).unusedClientTtl).to.equal(undefined);
    expect(loadConfig({ WORKERS: 'AUTO' }).workers).to.be.a('number').at.least(1);
    expect(loadConfig({ KEY_ROTATION_DAYS: '.5' }).keyRotation.everySeconds).to.equal(43_200);
    expect(loadConfig({ KEY_ROTATION_DAYS: '2.' }).keyRotation.everySeconds).to.equal(172_800);
    expect(configError({ KEY_ROTATION_DAYS: '.' })).to.match(/^KEY_ROTATION_DAYS must be a positive number of days/);
  });

  it('refuses a SQLite path that begins or ends with a space (a slip of quoting), and takes one with spaces inside', () => {
    for (const store of ['sqlite: ', 'sqlite: ./data/oauth.sqlite', 'sqlite:./data/oauth.sqlite ', 'sqlite:\t']) {
      expect(configError({ STORE: store }), JSON.stringify(store)).to.match(/^STORE's path begins or ends with a space/);
    }
    expect(loadConfig({ STORE: 'sqlite:./my data/oauth.sqlite' }).store).to.equal('sqlite:./my data/oauth.sqlite');
  });

  it('runs WORKERS over one store: a sqlite: file or Redis, never memory:, which is each process\'s own', () => {
    expect(loadConfig({ WORKERS: '2' }).workers).to.equal(2);
    expect(loadConfig({ WORKERS: '1', STORE: 'memory:' }).workers).to.equal(1);
    expect(loadConfig({ WORKERS: '2', STORE: 'redis://127.0.0.1:6379/0' }).workers).to.equal(2);
    expect(configError({ WORKERS: '2', STORE: 'memory:' })).to.match(/^WORKERS \(2\) runs processes over one store, and memory: is each process's own/);
  });

  it('waits for Redis replicas only on a Redis store, and sets SQLite\'s synchronous only on a SQLite one', () => {
    expect(loadConfig({}).durability).to.deep.equal({ replicaWait: undefined, sqliteSynchronous: 'normal' });
    const redis = { STORE: 'redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster' };
    expect(loadConfig({ ...redis, REDIS_WAIT_REPLICAS: '1' }).durability.replicaWait).to.deep.equal({ replicas: 1, timeoutMs: 500 });
    expect(loadConfig({ ...redis, REDIS_WAIT_REPLICAS: '2', REDIS_WAIT_TIMEOUT: '2s' }).durability.replicaWait).to.deep.equal({ replicas: 2, timeoutMs: 2000 });
    expect(loadConfig({ ...redis, REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT: '250ms' }).durability.replicaWait).to.deep.equal({ replicas: 1, timeoutMs: 250 });
    expect(loadConfig({ ...redis, REDIS_WAIT_REPLICAS: '0', REDIS_WAIT_TIMEOUT: '2s' }).durability.replicaWait).to.equal(undefined);
    expect(loadConfig({ SQLITE_SYNCHRONOUS: 'FULL' }).durability.sqliteSynchronous).to.equal('full');

    for (const store of ['sqlite:./data/oauth.sqlite', 'memory:']) {
      expect(configError({ STORE: store, REDIS_WAIT_REPLICAS: '1' }), store).to.match(/^REDIS_WAIT_REPLICAS waits for Redis replicas, and STORE is not a Redis URL/);
    }
    expect(configError({ ...redis, SQLITE_SYNCHRONOUS: 'full' })).to.match(/^SQLITE_SYNCHRONOUS applies to a sqlite: STORE/);
    expect(configError({ STORE: 'memory:', SQLITE_SYNCHRONOUS: 'full' })).to.match(/^SQLITE_SYNCHRONOUS applies to a sqlite: STORE/);
    for (const value of ['-1', 'one', '1.5', '101']) expect(configError({ ...redis, REDIS_WAIT_REPLICAS: value }), value).to.match(/^REDIS_WAIT_REPLICAS must be a whole number from 0 to 100/);
    // A bare number is refused: 500 would be 500 seconds to every other duration, and surely meant as milliseconds here.
    for (const value of ['500', '0ms', '11s', 'fast', '1m']) expect(configError({ ...redis, REDIS_WAIT_TIMEOUT: value }), value).to.match(/^REDIS_WAIT_TIMEOUT must be a duration with its unit from 1ms to 10s/);
    expect(configError({ SQLITE_SYNCHRONOUS: 'extra' })).to.match(/^SQLITE_SYNCHRONOUS must be one of normal, full/);
  });

  it('stops the service at start with a message naming the bad variable', () => {
    const result = spawnSync(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', STORE: 'memory:', PORT: '70000' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).to.equal(1);
    expect(result.stderr).to.match(/configuration error: PORT must be/);
    expect(result.stderr).to.not.match(/\n\s+at /);

    // Replicas to wait for on SQLite: refused in one line rather than ignored, as the operator expects writes to wait.
    const waiting = spawnSync(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', STORE: 'memory:', REDIS_WAIT_REPLICAS: '1' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(waiting.status).to.equal(1);
    expect(waiting.stderr.trim().split('\n')).to.have.length(1);
    expect(waiting.stderr).to.match(/^configuration error: REDIS_WAIT_REPLICAS waits for Redis replicas/);
  });
});

describe('configuration schema (config/)', () => {
  const names = Object.keys(SCHEMA);
  const guide = () => readFileSync(CONFIGURATION_DOCUMENT, 'utf8');

  it("the operator guide's Configuration table is the one generated from config/schema.ts, one row per variable", () => {
    expect(withTable(guide()), 'docs/operator-guide.md is out of date: npm run config:table -- --write').to.equal(guide());
    const rows = [...guide().matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((match) => match[1]);
    expect(rows.filter((name) => names.includes(name!))).to.deep.equal(names);
    const printed = spawnSync(process.execPath, ['config/table.ts'], { cwd: ROOT, encoding: 'utf8' });
    expect(printed.stdout).to.equal(`${configurationTable()}\n`);
  });

  it('loadConfig reads every variable of the schema and no other', () => {
    const read = new Set<string>();
    loadConfig(new Proxy({}, { get: (_target, name) => { read.add(String(name)); return undefined; } }));
    expect([...read].sort()).to.deep.equal([...names].sort());
  });

  it("each default the operator guide's Configuration table shows is the one the service uses, and an empty variable counts as unset", () => {
    // The Default cell of each row of the guide's table, as written there.
    const start = guide().indexOf('| Variable | Default | Meaning |');
    expect(start, 'the Configuration table in docs/operator-guide.md').to.be.greaterThan(-1);
    const cells = new Map<string, string>();
    for (const line of guide().slice(start).split('\n').slice(2)) {
      if (!line.startsWith('|')) break;
      const row = /^\| `([A-Z][A-Z0-9_]*)` \| (.*?) \| /.exec(line);
      expect(row, `a row of the Configuration table: ${line}`).to.not.equal(null);
      cells.set(row![1]!, row![2]!);
    }
    expect([...cells.keys()].sort()).to.deep.equal([...names].sort());

    // A value in backticks is a default the service must use; `—` (unset) or words ("all interfaces") name none to try.
    const shown = new Map<string, string>();
    for (const [name, cell] of cells) {
      const value = /^`([^`]+)`$/.exec(cell);
      if (value) shown.set(name, value[1]!);
      else expect(cell, `${name}: a Default cell that is neither one value in backticks nor a description`).to.not.match(/^`/);
    }
    expect(shown.size, 'defaults shown in backticks').to.be.greaterThan(10);

    const defaults = loadConfig({});
    for (const [name, value] of shown) {
      // `http://localhost:$PORT`: another variable's default, as the table shows it.
      const written = value.replace(/\$([A-Z][A-Z0-9_]*)/g, (_, other: string) => {
        expect(shown.has(other), `${name} refers to ${other}, which shows no default`).to.equal(true);
        return shown.get(other)!;
      });
      expect(loadConfig({ [name]: written }), `${name}=${written} (the guide's default)`).to.deep.equal(defaults);
    }
    for (const name of names) expect(loadConfig({ [name]: '' }), `${name}=''`).to.deep.equal(defaults);
    expect(loadConfig({ PORT: '8080' }).issuer).to.equal('http://localhost:8080');
  });

  it('the example environment files name only variables of the schema, load as they say, and hold no secret', () => {
    const example = (file: string) => {
      const content = readFileSync(`${ROOT}/config/${file}`, 'utf8');
      // Commented-out settings too: they must name real variables.
      const named = [...content.matchAll(/^#?\s*([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1]!);
      for (const name of named) expect(names, `${file}: ${name}`).to.include(name);
      return parseEnv(content) as Record<string, string>;
    };

    const development = loadConfig(example('development.env'));
    expect(development).to.deep.include({ issuer: 'http://localhost:3000', store: 'sqlite:./data/oauth.sqlite', registration: 'open' });

    const env = example('production-redis.env');
    const production = loadConfig(env);
    expect(production.issuer).to.match(/^https:/);
    expect(production.store).to.match(/^rediss:/);
    expect(production).to.deep.include({ keyEncryptionKey: { file: '/run/secrets/oauth-key-encryption-key' }, registration: 'initial_access_token', proxyHops: 1 });
    expect(production.keyRotation.everySeconds).to.equal(90 * 86_400);
    for (const secret of ['KEY_ENCRYPTION_KEY', 'KEY_ENCRYPTION_KEY_PREVIOUS', 'METRICS_TOKEN']) expect(env, secret).to.not.have.property(secret);
    expect(new URL(env.STORE!).password).to.equal('REPLACE_ME');
  });

  it('finds settings one slip away from a known name, in a family of them, or named as other services name them, and leaves the system\'s own variables alone', () => {
    const env = {
      BASEURL: '', LOG_LEVL: '', PKCE_REQUIRE: '', PROT: '', METRICS_ADDRESS: '', PORT: '3000', REDIS_URL: '',
      HOME: '', HOSTNAME: '', PATH: '', USER: '', SHELL: '', TERM: '', LANG: '', PWD: '', LOGNAME: '', NODE_ENV: '', XDG_RUNTIME_DIR: '', lowercase_port: '',
    };
    expect(misspelledSettings(env)).to.deep.equal([
      { name: 'BASEURL', meant: 'BASE_URL' },
      { name: 'LOG_LEVL', meant: 'LOG_LEVEL' },
      { name: 'METRICS_ADDRESS', meant: 'METRICS_HOST' },
      { name: 'PKCE_REQUIRE', meant: 'PKCE_REQUIRED' },
      { name: 'PROT', meant: 'PORT' },
      { name: 'REDIS_URL', meant: 'STORE' },
    ]);
  });
});
