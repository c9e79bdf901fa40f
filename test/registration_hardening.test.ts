import { hash } from 'node:crypto';

import { expect } from 'chai';

import { openStore } from '../adapters/index.ts';
import { register } from './helpers/oauth.ts';
import { startRedis, type RedisServer } from './helpers/redis.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from './helpers/server.ts';

/**
 * Registration hardening (issue 9): initial access tokens are single-use by default and expire.
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
      expect((await register(server.issuer, machine, iat)).status).to.equal(201);
      await expectRefusal(await register(server.issuer, machine, iat), 401, 'invalid_token');
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
      for (const expiresIn of ['soon', '0', '1w']) {
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
