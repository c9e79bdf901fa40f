import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';

import { sqliteFile } from '../../adapters/index.ts';
import { codeRequest, exchangeCode, introspect, postCredentials, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { keysUnder, rawRedis, startRedis, type RedisServer } from '../support/redis.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * What one grant keeps in the store stays the same however often its refresh token rotates, on
 * both stores, while any earlier refresh token of the grant, presented again, still revokes it.
 */

const ROTATIONS = 1000;
const MAX_BYTES_PER_GRANT = 4096;
/** The records a grant keeps: the grant, its refresh token, its workspace and last use, and the code it was redeemed with. */
const GRANT_MODELS = ['Grant', 'RefreshToken', 'GrantWorkspace', 'GrantActivity', 'AuthorizationCode'];

interface Tokens { access_token: string; refresh_token: string }

interface Backend {
  server: TestServer;
  /** Bytes the grant's records take, and how many refresh token records there are. */
  grantStorage(): Promise<{ bytes: number; refreshTokens: number }>;
  stop(): Promise<void>;
}

const BACKENDS: Array<{ name: string; start(): Promise<Backend> }> = [
  {
    name: 'SQLite',
    async start() {
      const server = await startServer({ env: { RATE_LIMITS: 'off' } });
      return {
        server,
        async grantStorage() {
          const db = new DatabaseSync(sqliteFile(server.store)!, { readOnly: true });
          try {
            const placeholders = GRANT_MODELS.map(() => '?').join(',');
            // Every stored byte of those rows: each column's length as SQLite keeps it.
            const row = db.prepare(`SELECT
                coalesce(sum(length(model) + length(id) + length(payload) + coalesce(length(grant_id), 0) + coalesce(length(listed_by), 0) + 24), 0) AS bytes,
                coalesce(sum(model = 'RefreshToken'), 0) AS refreshTokens
              FROM oidc_models WHERE model IN (${placeholders})`).get(...GRANT_MODELS) as { bytes: number; refreshTokens: number };
            return { bytes: Number(row.bytes), refreshTokens: Number(row.refreshTokens) };
          } finally {
            db.close();
          }
        },
        stop: () => server.stop(),
      };
    },
  },
  {
    name: 'Redis',
    async start() {
      const redis: RedisServer = await startRedis();
      const server = await startServer({ store: redis.url, env: { RATE_LIMITS: 'off', KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') } });
      return {
        server,
        async grantStorage() {
          const client = await rawRedis(redis.url);
          try {
            let bytes = 0;
            let refreshTokens = 0;
            for (const key of (await keysUnder(redis.url, '')).keys()) {
              // oauth:m:RefreshToken:<id>, oauth:grant:RefreshToken:<grant>, oauth:by:Grant:<user>...
              const model = key.split(':')[2] ?? '';
              if (!GRANT_MODELS.includes(model)) continue;
              bytes += Number(await client.memory('USAGE', key, 'SAMPLES', '0') ?? 0);
              if (key.includes(':m:RefreshToken:')) refreshTokens += 1;
            }
            return { bytes, refreshTokens };
          } finally {
            client.disconnect();
          }
        },
        stop: async () => { await server.stop(); await redis.stop(); },
      };
    },
  },
];

for (const { name, start } of BACKENDS) {
  describe(`what a grant keeps in the store, on ${name}`, function () {
    this.timeout(180_000);
    let backend: Backend;
    let client: RegisteredClient;

    before(async () => {
      backend = await start();
      client = await registerClient(backend.server.issuer);
    });
    after(() => backend?.stop());

    async function newGrant(): Promise<Tokens> {
      const user = await seedUser(backend.server);
      const { url, verifier } = codeRequest(backend.server.issuer, client.client_id);
      const callback = await authorize(new UserAgent(), url, backend.server.origin, { email: user.email, password: user.password });
      const response = await exchangeCode(backend.server.issuer, client, callback.searchParams.get('code')!, verifier);
      expect(response.status).to.equal(200);
      return await response.json() as Tokens;
    }

    async function refresh(refreshToken: string): Promise<Response> {
      return tokenRequest(backend.server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });
    }

    it(`stays under ${MAX_BYTES_PER_GRANT} bytes after ${ROTATIONS} rotations, and the first refresh token then still revokes the grant`, async () => {
      const first = await newGrant();
      let latest = first;
      for (let i = 0; i < ROTATIONS; i += 1) {
        const response = await refresh(latest.refresh_token);
        expect(response.status, `rotation ${i + 1}`).to.equal(200);
        latest = await response.json() as Tokens;
      }

      const { bytes, refreshTokens } = await backend.grantStorage();
      expect(refreshTokens, 'refresh token records kept').to.equal(1);
      expect(bytes, 'bytes the grant keeps').to.be.at.most(MAX_BYTES_PER_GRANT);

      const reused = await refresh(first.refresh_token);
      expect(reused.status).to.equal(400);
      expect(await reused.json()).to.include({ error: 'invalid_grant' });
      const after = await refresh(latest.refresh_token);
      expect(after.status, 'the latest refresh token, once an earlier one was reused').to.equal(400);
      expect((await introspect(backend.server.issuer, postCredentials(client), latest.access_token)).active, 'the latest access token').to.equal(false);
      expect((await backend.grantStorage()).bytes, 'nothing of the revoked grant is left but the spent code').to.be.below(1024);
    });

    it('a rotated-out refresh token presented by another client revokes nothing', async () => {
      const other = await registerClient(backend.server.issuer);
      const first = await newGrant();
      const second = await refresh(first.refresh_token).then((response) => response.json() as Promise<Tokens>);
      const stolen = await tokenRequest(backend.server.issuer, { grant_type: 'refresh_token', refresh_token: first.refresh_token, ...postCredentials(other) });
      expect(stolen.status).to.equal(400);
      expect(await stolen.json()).to.include({ error: 'invalid_grant' });
      expect((await refresh(second.refresh_token)).status, 'the client keeps its grant').to.equal(200);
    });

    it('a mangled or made-up value naming a live grant is only an unknown token: the grant keeps working', async () => {
      const first = await newGrant();
      const second = await refresh(first.refresh_token).then((response) => response.json() as Promise<Tokens>);
      const [grantId, random, tag] = first.refresh_token.split('.') as [string, string, string];
      const flipped = `${tag.slice(0, -1)}${tag.endsWith('A') ? 'B' : 'A'}`;
      for (const value of [`${grantId}.${random}.${flipped}`, `${grantId}.${'x'.repeat(43)}`, `${first.refresh_token},${first.refresh_token}`, first.refresh_token.slice(0, -3)]) {
        const response = await refresh(value);
        expect(response.status, value).to.equal(400);
        expect(await response.json()).to.include({ error: 'invalid_grant' });
      }
      const revoked = await fetch(`${backend.server.issuer}/oauth/revoke`, {
        method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: `${grantId}.${random}.${flipped}`, ...postCredentials(client) }),
      });
      expect(revoked.status).to.equal(200);
      expect((await refresh(second.refresh_token)).status, 'the grant was not revoked').to.equal(200);
    });
  });
}

describe('the absolute lifetime of a grant\'s refresh tokens', function () {
  this.timeout(60_000);
  let server: TestServer;
  let client: RegisteredClient;
  before(async () => {
    server = await startServer({ env: { REFRESH_TOKEN_ABSOLUTE_LIFETIME: '2h' } });
    client = await registerClient(server.issuer);
  });
  after(() => server?.stop());

  it('is not extended by rotation: each new refresh token expires when the first one of its grant would', async () => {
    const user = await seedUser(server);
    const { url, verifier } = codeRequest(server.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    const first = await (await exchangeCode(server.issuer, client, callback.searchParams.get('code')!, verifier)).json() as Tokens;
    const described = await introspect(server.issuer, postCredentials(client), first.refresh_token);
    expect(described.active).to.equal(true);
    const firstExpiry = described.exp as number;
    expect(firstExpiry - (described.iat as number), 'the first refresh token lasts the absolute lifetime, shorter than 30 days').to.equal(7200);

    await new Promise((resolve) => setTimeout(resolve, 1100));
    const rotated = await (await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: first.refresh_token, ...postCredentials(client) })).json() as Tokens;
    const next = await introspect(server.issuer, postCredentials(client), rotated.refresh_token);
    expect(next.active).to.equal(true);
    expect(next.exp, 'a rotation a second later ends at the same time').to.be.at.most(firstExpiry);
  });
});
