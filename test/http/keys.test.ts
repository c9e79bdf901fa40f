import { spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';
import { createLocalJWKSet, jwtVerify, type JWK } from 'jose';

import { initialAccessToken, seedUser, startServer, type TestServer } from '../support/server.ts';
import { introspect, postCredentials, registerClient, tokenRequest } from '../support/oauth.ts';
import { privateJwk } from '../support/keys.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

async function clientCredentialsToken(server: TestServer): Promise<{ token: string; credentials: Record<string, string> }> {
  const user = await seedUser(server);
  const client = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
  const credentials = postCredentials(client);
  const response = await tokenRequest(server.issuer, { grant_type: 'client_credentials', ...credentials });
  expect(response.status).to.equal(200);
  return { token: ((await response.json()) as { access_token: string }).access_token, credentials };
}

describe('signing keys', () => {
  describe('two instances on one store', () => {
    let first: TestServer;
    let second: TestServer;

    before(async () => {
      first = await startServer();
      // Instances behind one load balancer: one issuer, one store, each on its own port.
      second = await startServer({ store: first.store, env: { BASE_URL: first.issuer } });
    });

    after(async () => {
      await second.stop();
      await first.stop();
    });

    it('publish the same keys, and one accepts the tokens and clients of the other', async () => {
      const jwks = async (server: TestServer) => (await fetch(`${server.origin}/oauth/jwks`)).json() as Promise<{ keys: JWK[] }>;
      expect(await jwks(second)).to.deep.equal(await jwks(first));

      const { token, credentials } = await clientCredentialsToken(first);
      expect(await introspect(second.origin, credentials, token)).to.include({ active: true, client_id: credentials.client_id });
      const { payload } = await jwtVerify(token, createLocalJWKSet(await jwks(second)));
      expect(payload.iss).to.equal(first.issuer);
    });
  });

  describe('an operator-supplied JWKS_FILE', () => {
    let dir: string;
    let server: TestServer;
    let keys: JWK[];

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'jwks-'));
      keys = [await privateJwk('ES256'), await privateJwk('RS256')];
      await writeFile(join(dir, 'jwks.json'), JSON.stringify({ keys }));
      server = await startServer({ env: { JWKS_FILE: join(dir, 'jwks.json') } });
    });

    after(async () => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    });

    it('signs access tokens with the operator\'s key and publishes only its public part', async () => {
      const published = await (await fetch(`${server.issuer}/oauth/jwks`)).json() as { keys: JWK[] };
      expect(published.keys.map((key) => key.kid).sort()).to.deep.equal(keys.map((key) => key.kid).sort());
      for (const key of published.keys) expect(key).to.not.have.property('d');

      const { token } = await clientCredentialsToken(server);
      const { d: _d, ...ecPublic } = keys[0]!;
      const { protectedHeader } = await jwtVerify(token, createLocalJWKSet({ keys: [ecPublic] }));
      expect(protectedHeader.kid).to.equal(keys[0]!.kid);
    });

    it('stops the service with one line naming JWKS_FILE when the file cannot serve', async () => {
      await writeFile(join(dir, 'ec-only.json'), JSON.stringify({ keys: [keys[0]] }));
      await writeFile(join(dir, 'null.json'), 'null');
      await writeFile(join(dir, 'null-key.json'), JSON.stringify({ keys: [null] }));
      const { n: _n, ...brokenRsa } = keys[1]!;
      await writeFile(join(dir, 'broken-rsa.json'), JSON.stringify({ keys: [keys[0], brokenRsa] }));
      await writeFile(join(dir, 'not-a-key.json'), JSON.stringify({ keys: [keys[0], keys[1], { kty: 'EC', crv: 'P-256', d: 'x', x: 'y', y: 'z' }] }));
      await writeFile(join(dir, 'same-kid.json'), JSON.stringify({ keys: [keys[0], { ...keys[1], kid: keys[0]!.kid }] }));
      await writeFile(join(dir, 'for-encryption.json'), JSON.stringify({ keys: [keys[0], { ...keys[1], use: 'enc' }] }));
      await writeFile(join(dir, 'wrong-alg.json'), JSON.stringify({ keys: [{ ...keys[0], alg: 'RS256' }, keys[1]] }));
      const short = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ format: 'jwk' });
      await writeFile(join(dir, 'short-rsa.json'), JSON.stringify({ keys: [keys[0], { ...short, kid: 'short' }] }));
      for (const [file, message] of [
        ['missing.json', /JWKS_FILE .*cannot be read/], ['ec-only.json', /JWKS_FILE .*RSA key/], ['null.json', /JWKS_FILE .*must be a JSON Web Key Set/],
        ['null-key.json', /JWKS_FILE .*key 1 is not a JSON Web Key/], ['broken-rsa.json', /JWKS_FILE .*key 2 \(RSA\) is not a usable JSON Web Key/],
        ['not-a-key.json', /JWKS_FILE .*key 3 \(EC\) is not a usable JSON Web Key/],
        ['same-kid.json', /JWKS_FILE .*two keys have the same kid/], ['for-encryption.json', /JWKS_FILE .*key 2 is for use "enc"/],
        ['wrong-alg.json', /JWKS_FILE .*key 1 \(EC\) names alg "RS256"/], ['short-rsa.json', /JWKS_FILE .*key 2 \(RSA\) is shorter than 2048 bits/],
      ] as const) {
        const result = spawnSync(process.execPath, ['src/main.ts'], {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', STORE: 'memory:', PORT: '0', METRICS_PORT: '0', JWKS_FILE: join(dir, file) },
          encoding: 'utf8',
          timeout: 20_000,
        });
        expect(result.status, file).to.equal(1);
        expect(result.stderr, file).to.match(message);
        const said = result.stderr.split('\n').filter((line) => line && !line.startsWith('{'));
        expect(said, `${file}: one line besides the JSON log`).to.have.length(1);
        expect(said[0], file).to.match(/^configuration error: JWKS_FILE /);
      }
    });

    it('refuses a JWKS_FILE that will not do before it writes anything: no store, no key-encryption key file; text that is not JSON named in one line', async () => {
      const start = await mkdtemp(join(tmpdir(), 'jwks-first-'));
      try {
        await writeFile(join(start, 'junk.json'), 'garbage\nmore garbage\n');
        const result = spawnSync(process.execPath, ['src/main.ts'], {
          cwd: ROOT,
          env: {
            PATH: process.env.PATH ?? '', STORE: `sqlite:${join(start, 'data', 'oauth.sqlite')}`, XDG_CONFIG_HOME: join(start, 'config'),
            PORT: '0', METRICS_PORT: '0', JWKS_FILE: join(start, 'junk.json'),
          },
          encoding: 'utf8',
          timeout: 20_000,
        });
        expect(result.status, result.stderr).to.equal(1);
        expect(result.stderr.split('\n').filter(Boolean), result.stderr).to.have.length(1);
        expect(result.stderr).to.match(/^configuration error: JWKS_FILE .*junk\.json cannot be read as JSON: /);
        expect(await readdir(start), 'nothing was written').to.deep.equal(['junk.json']);
      } finally {
        await rm(start, { recursive: true, force: true });
      }
    });
  });

  describe('KEY_ENCRYPTION_KEY_FILE', () => {
    it('is used when other users can read it, with a warning at start naming the file and its mode; an owner-only one draws none', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'kek-file-'));
      try {
        for (const [mode, warned] of [[0o644, true], [0o600, false]] as const) {
          const file = join(dir, `kek-${mode.toString(8)}`);
          await writeFile(file, `${Buffer.alloc(32, mode % 251).toString('base64url')}\n`, { mode });
          await chmod(file, mode);
          const server = await startServer({ env: { KEY_ENCRYPTION_KEY_FILE: file } });
          try {
            expect((await fetch(`${server.issuer}/oauth/jwks`)).status, 'serving with the key').to.equal(200);
            const warnings = server.logs().split('\n').filter((line) => line.includes('can be read by other users'));
            if (warned) {
              expect(warnings, server.logs()).to.have.length(1);
              expect(JSON.parse(warnings[0]!)).to.deep.include({ level: 'warn', file, mode: '0644' });
            } else {
              expect(warnings).to.deep.equal([]);
            }
          } finally {
            await server.stop();
          }
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  describe('the key-encryption key file made at first start', () => {
    it('when it cannot be made (XDG_CONFIG_HOME under a file), stops the service in one line naming the settings that fix it, and writes nothing', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'kek-unmade-'));
      try {
        await writeFile(join(dir, 'a-file'), 'x');
        const result = spawnSync(process.execPath, ['src/main.ts'], {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', METRICS: 'off', STORE: `sqlite:${join(dir, 'oauth.sqlite')}`, XDG_CONFIG_HOME: join(dir, 'a-file') },
          encoding: 'utf8',
          timeout: 20_000,
        });
        expect(result.status).to.equal(1);
        const said = result.stderr.split('\n').filter((line) => line && !line.startsWith('{'));
        expect(said, result.stderr).to.have.length(1);
        expect(said[0]).to.match(/^configuration error: KEY_ENCRYPTION_KEY_FILE is not set, and the key-encryption key file cannot be created at .*: set KEY_ENCRYPTION_KEY_FILE, or XDG_CONFIG_HOME to a directory this user can write$/);
        expect(await readdir(dir), 'no database').to.deep.equal(['a-file']);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  describe('an https BASE_URL with the embedded store', () => {
    let dir: string;

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'https-kek-'));
    });

    after(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    const start = (env: Record<string, string>) => spawnSync(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '', HOME: join(dir, 'home'), PORT: '0', HOST: '127.0.0.1', METRICS: 'off',
        BASE_URL: 'https://auth.example.com', STORE: `sqlite:${join(dir, 'data', 'oauth.sqlite')}`, ...env,
      },
      encoding: 'utf8',
      timeout: 20_000,
    });

    it('refuses to start without an explicit key-encryption key, in one line naming the variable, and makes no key file', async () => {
      const result = start({});
      expect(result.status).to.equal(1);
      expect(result.stderr.trim().split('\n')).to.have.length(1);
      expect(result.stderr).to.match(/^configuration error: BASE_URL is https, so the key-encryption key must be given: set KEY_ENCRYPTION_KEY_FILE \(or KEY_ENCRYPTION_KEY\)/);
      expect(await readdir(dir), 'nothing was written: no key file, no database').to.deep.equal([]);
    });

    it('refuses a key an earlier version left beside the database, saying how to keep using it', async () => {
      const legacy = join(dir, 'data', 'oauth.kek');
      await mkdir(join(dir, 'data'), { recursive: true, mode: 0o700 });
      await writeFile(legacy, `${Buffer.alloc(32, 9).toString('base64url')}\n`, { mode: 0o600 });
      const refused = start({});
      expect(refused.status).to.equal(1);
      expect(refused.stderr.trim().split('\n')).to.have.length(1);
      expect(refused.stderr).to.include(`the one found beside the database (${legacy})`).and.include('set KEY_ENCRYPTION_KEY_FILE to its new path');
      expect(await readdir(join(dir, 'data')), 'no database was made').to.deep.equal(['oauth.kek']);
    });
  });
});
