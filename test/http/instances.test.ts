import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import { PROPAGATION_BOUND_MS } from '../../src/shared/propagation.ts';
import { CLOCK_MARGIN_SECONDS } from '../../src/tokens/revocation_list.ts';
import { api, createApiKey } from '../support/data_api.ts';
import { codeRequest, exchangeCode, introspect, management, postCredentials, registerClient, tokenRequest, REDIRECT_URI, type RegisteredClient } from '../support/oauth.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { rawRedis, startRedis, type RedisServer } from '../support/redis.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

/** Two instances behind one load balancer: one issuer, one store, each on its own port. */
interface SharedStore {
  name: string;
  start(): Promise<{ first: TestServer; second: TestServer; stop(): Promise<void> }>;
}

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64url');

const SHARED_STORES: SharedStore[] = [
  {
    name: 'one SQLite file',
    async start() {
      const first = await startServer();
      const second = await startServer({ store: first.store, env: { BASE_URL: first.issuer } });
      return { first, second, stop: async () => { await second.stop(); await first.stop(); } };
    },
  },
  {
    name: 'one Redis',
    async start() {
      const redis: RedisServer = await startRedis();
      const first = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY } });
      const second = await startServer({ store: redis.url, env: { BASE_URL: first.issuer, KEY_ENCRYPTION_KEY } });
      return { first, second, stop: async () => { await second.stop(); await first.stop(); await redis.stop(); } };
    },
  },
];

/**
 * Several instances behind one load balancer share one store. What one instance (or the admin
 * CLI) changes, every other honours within PROPAGATION_BOUND_MS: revoked grants and tokens,
 * deleted and updated clients; and each serves what the other issued.
 */
for (const shared of SHARED_STORES) describe(`instances sharing ${shared.name}`, function () {
  this.timeout(60_000);

  let first: TestServer;
  let second: TestServer;
  let stopAll: () => Promise<void>;
  let user: SeededUser;
  let app: RegisteredClient;
  /** Extra time for the test's own requests, on top of the bound the service guarantees. */
  const REQUEST_SLACK_MS = 300;

  before(async () => {
    ({ first, second, stop: stopAll } = await shared.start());
    user = await seedUser(first);
    app = await registerClient(first.issuer, { client_name: 'Shared App' });
  });

  after(async () => {
    await stopAll?.();
  });

  it('publish the same signing keys, and a code issued at one redeems at the other, once', async () => {
    const jwks = async (server: TestServer) => (await fetch(`${server.origin}/oauth/jwks`)).json();
    expect(await jwks(second)).to.deep.equal(await jwks(first));

    const { url, verifier } = codeRequest(first.origin, app.client_id);
    const callback = await authorize(new UserAgent(), url, first.origin, { email: user.email, password: user.password });
    const code = callback.searchParams.get('code')!;
    const redeemed = await exchangeCode(second.origin, app, code, verifier);
    expect(redeemed.status, 'the client registered at the first instance authenticates at the second').to.equal(200);
    const replayed = await exchangeCode(first.origin, app, code, verifier);
    expect(replayed.status).to.equal(400);
    expect((await replayed.json() as { error: string }).error).to.equal('invalid_grant');
  });

  it('take an authorization request posted to one instance at the other, through the 303\'s handle, once', async () => {
    const { params } = codeRequest(first.issuer, app.client_id, { scope: 'api unknown-scope', state: 'posted-at-first' });
    const posted = await fetch(`${first.origin}/oauth/authorize`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(params).toString(), redirect: 'manual',
    });
    expect(posted.status).to.equal(303);
    const handle = new URL(posted.headers.get('location')!).search;
    const atSecond = await fetch(`${second.origin}/oauth/authorize${handle}`, { redirect: 'manual' });
    expect(atSecond.status, 'the engine\'s page holding an error for a self-registered client').to.equal(400);
    expect(await atSecond.text()).to.include('posted-at-first');
    const again = await fetch(`${first.origin}/oauth/authorize${handle}`, { redirect: 'manual' });
    expect(again.status).to.equal(400);
    expect(await again.text()).to.include('has been used already');
  });

  /**
   * Tokens for the user through the code flow, all of it at `server`: the browser follows the
   * issuer's URLs (both instances emit only those), and the load balancer sends it to `server`.
   */
  async function userTokens(server: TestServer): Promise<{ access_token: string; refresh_token: string }> {
    const { url, verifier } = codeRequest(first.issuer, app.client_id, { scope: 'api profile' });
    const callback = await authorize(new BalancedAgent(first.origin, server.origin), url, first.origin, { email: user.email, password: user.password });
    const response = await exchangeCode(server.origin, app, callback.searchParams.get('code')!, verifier);
    expect(response.status).to.equal(200);
    return response.json() as Promise<{ access_token: string; refresh_token: string }>;
  }

  const userinfoStatus = async (server: TestServer, accessToken: string) =>
    (await fetch(`${server.origin}/oauth/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } })).status;

  const revoke = (server: TestServer, client: RegisteredClient, token: string) => fetch(`${server.origin}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token, ...postCredentials(client) }).toString(),
  });

  /** Polls `check` until it holds; returns the milliseconds that took, or fails past the bound. */
  async function withinBound(check: () => Promise<boolean>, startedAt: number, what: string): Promise<number> {
    const deadline = startedAt + PROPAGATION_BOUND_MS + REQUEST_SLACK_MS;
    for (;;) {
      if (await check()) return Date.now() - startedAt;
      if (Date.now() > deadline) throw new Error(`${what}: not seen within ${PROPAGATION_BOUND_MS} ms (+${REQUEST_SLACK_MS} ms for the requests)`);
      await sleep(50);
    }
  }

  it('lets at most one of concurrent redemptions of a code spread over both instances win; the others get invalid_grant, never a 5xx', async () => {
    const { url, verifier } = codeRequest(first.origin, app.client_id);
    const callback = await authorize(new UserAgent(), url, first.origin, { email: user.email, password: user.password });
    const code = callback.searchParams.get('code')!;
    const responses = await Promise.all(Array.from({ length: 6 }, (_, i) => exchangeCode((i % 2 ? first : second).origin, app, code, verifier)));
    const statuses = responses.map((response) => response.status);
    // One redemption consumes the code. A request that finds it consumed is a replay, which revokes
    // the grant (RFC 6749 section 4.1.2); when that happens before the winner has issued its tokens,
    // the winner is refused too. Never two.
    expect(statuses.filter((status) => status === 200).length, `statuses ${statuses}`).to.be.at.most(1);
    for (const response of responses.filter(({ status }) => status !== 200)) {
      expect(response.status).to.equal(400);
      expect((await response.json() as { error: string }).error).to.equal('invalid_grant');
    }
  });

  it('of two uses of one refresh token at once, the one that loses is asked to wait, never refused while the grant lives on (RFC 9700 4.14.2)', async () => {
    for (let round = 0; round < 3; round += 1) {
      const tokens = await userTokens(first);
      const refresh = (at: TestServer) => tokenRequest(at.origin, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(app) });
      const responses = await Promise.all([refresh(first), refresh(second)]);
      const winner = responses.find(({ status }) => status === 200);
      const loser = responses.find((response) => response !== winner)!;
      expect(winner, `round ${round}: statuses ${responses.map(({ status }) => status)}`).to.not.equal(undefined);
      const rotated = await winner!.json() as { refresh_token: string };
      const next = await tokenRequest(first.origin, { grant_type: 'refresh_token', refresh_token: rotated.refresh_token, ...postCredentials(app) });
      if (loser.status === 503) {
        expect(Number(loser.headers.get('retry-after')), `round ${round}`).to.be.within(1, 20);
        expect(next.status, `round ${round}: the winner's refresh token still works`).to.equal(200);
      } else {
        // Found spent once the winner had completed: a reuse, which ends the whole grant.
        expect(loser.status, `round ${round}`).to.equal(400);
        expect(next.status, `round ${round}: a reuse revoked the grant`).to.equal(400);
      }
    }
  });

  it('a grant revoked at one instance is refused by the other within the bound', async () => {
    const tokens = await userTokens(first);
    expect(await userinfoStatus(second, tokens.access_token)).to.equal(200);

    const revoked = await revoke(first, app, tokens.refresh_token);
    expect(revoked.status).to.equal(200);
    const revokedAt = Date.now();
    expect(await userinfoStatus(first, tokens.access_token), 'at the instance that revoked it: at once').to.equal(401);

    await withinBound(async () => await userinfoStatus(second, tokens.access_token) === 401, revokedAt, 'userinfo at the other instance');
    expect(await introspect(second.origin, postCredentials(app), tokens.access_token)).to.deep.equal({ active: false });
  });

  it('refresh-token reuse detected at one instance ends the access tokens at the other', async () => {
    const tokens = await userTokens(second);
    const rotated = await tokenRequest(second.origin, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(app) });
    expect(rotated.status).to.equal(200);
    const { access_token: current } = await rotated.json() as { access_token: string };
    expect(await userinfoStatus(first, current)).to.equal(200);

    const replay = await tokenRequest(first.origin, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(app) });
    expect(replay.status).to.equal(400);
    const replayedAt = Date.now();
    await withinBound(async () => await userinfoStatus(second, current) === 401, replayedAt, 'the rotated chain at the other instance');
  });

  it('an access token revoked (RFC 7009) at one instance is inactive at the other within the bound', async () => {
    const tokens = await userTokens(first);
    expect((await introspect(second.origin, postCredentials(app), tokens.access_token)).active).to.equal(true);
    expect((await revoke(second, app, tokens.access_token)).status).to.equal(200);
    const revokedAt = Date.now();
    await withinBound(async () => (await introspect(first.origin, postCredentials(app), tokens.access_token)).active === false, revokedAt, 'introspection at the other instance');
    expect(await userinfoStatus(first, tokens.access_token)).to.equal(401);
  });

  it('keeps a revocation only as long as the token it refuses can live', async () => {
    const tokens = await userTokens(first);
    const { exp, jti } = JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString()) as { exp: number; jti: string };
    expect((await revoke(first, app, tokens.access_token)).status).to.equal(200);

    const store = openStore(first.store);
    try {
      const { entries } = await store.revocations.changesSince(0);
      const entry = entries.find(({ key }) => key === `token:${jti}`);
      expect(entry, 'the revocation entry').to.not.equal(undefined);
      expect(entry!.expiresAt).to.equal(exp + CLOCK_MARGIN_SECONDS);
    } finally {
      await store.close();
    }
  });

  it('a client updated at one instance is seen as updated by the other within the bound', async () => {
    const own = await registerClient(first.issuer, { client_name: 'Changing App' });
    const added = 'http://127.0.0.1:9/added-callback';
    // 303 to the login page once the redirect URI is registered; the error page (400) before.
    const authorizeStatus = async (server: TestServer) => (await fetch(
      codeRequest(server.origin, own.client_id, { redirect_uri: added }).url,
      { redirect: 'manual' },
    )).status;
    // The other instance now holds the client in its cache.
    expect(await authorizeStatus(second)).to.equal(400);

    const updated = await fetch(own.registration_client_uri, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${own.registration_access_token}` },
      body: JSON.stringify({
        client_id: own.client_id,
        client_name: 'Changing App',
        redirect_uris: [REDIRECT_URI, added],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_post',
      }),
    });
    expect(updated.status, await updated.clone().text()).to.equal(200);
    const updatedAt = Date.now();
    expect(await authorizeStatus(first), 'at the instance that updated it: at once').to.equal(303);

    await withinBound(async () => await authorizeStatus(second) === 303, updatedAt, 'the new redirect URI at the other instance');
  });

  it("a client deleted at one instance is refused by the other within the bound, and so are its tokens", async () => {
    const iat = await initialAccessToken(first, user.workspaces[0]!.id);
    const doomed = await registerClient(first.issuer, { client_name: 'Doomed', grant_types: ['client_credentials'], redirect_uris: [] }, iat);
    const issue = (server: TestServer) => tokenRequest(server.origin, { grant_type: 'client_credentials', ...postCredentials(doomed) });
    const issued = await issue(second);
    expect(issued.status).to.equal(200);
    const { access_token: accessToken } = await issued.json() as { access_token: string };
    // Introspected by a resource server of the operator's (only those, and the token's own client, may).
    const created = await first.admin(['resource-server', 'create', '--name', 'Gateway', '--auth-method', 'client_secret_post', '--json']);
    expect(created.code, created.stderr).to.equal(0);
    const gateway = JSON.parse(created.stdout) as { client_id: string; client_secret: string };
    expect((await introspect(second.origin, postCredentials(gateway), accessToken)).active).to.equal(true);

    const deleted = await fetch(doomed.registration_client_uri, { method: 'DELETE', headers: { authorization: `Bearer ${doomed.registration_access_token}` } });
    expect(deleted.status).to.equal(204);
    const deletedAt = Date.now();

    await withinBound(async () => (await issue(second)).status === 401, deletedAt, 'the deleted client at the other instance');
    // Its tokens end through the revocation list, which the other instance reads on its own schedule
    // (not the client cache's): within the same bound, not necessarily by the time the client is refused.
    await withinBound(async () => (await introspect(second.origin, postCredentials(gateway), accessToken)).active === false, deletedAt, 'the deleted client\'s token at the other instance');
  });

  /** An RFC 7592 update of `own` sent to `at`, with `token`. */
  const updateAt = (at: TestServer, own: RegisteredClient, token: string, name: string) =>
    management(own.registration_client_uri.replace(first.issuer, at.origin), token, 'PUT', { client_id: own.client_id, client_name: name, redirect_uris: [REDIRECT_URI] });

  it('of concurrent RFC 7592 updates with one registration access token, over both instances, applies one and leaves one token that works', async () => {
    for (let round = 0; round < 3; round++) {
      const own = await registerClient(first.issuer, { client_name: 'Racing Updates' });
      const answers = await Promise.all(Array.from({ length: 6 }, (_, index) => updateAt(index % 2 ? second : first, own, own.registration_access_token, `update ${index}`)));
      const statuses = answers.map(({ status }) => status);
      expect(statuses.filter((status) => status === 200), `round ${round}: ${statuses}`).to.have.length(1);
      expect(statuses.filter((status) => status !== 200), `round ${round}: the others are refused the token (RFC 6750)`).to.deep.equal(Array(5).fill(401));
      const winner = answers[statuses.indexOf(200)]!;
      const { registration_access_token: successor, client_name: name } = await winner.json() as { registration_access_token: string; client_name: string };
      const working = [];
      for (const token of [own.registration_access_token, successor]) if ((await management(own.registration_client_uri, token)).status === 200) working.push(token);
      expect(working, `round ${round}: the registration access tokens that still work`).to.deep.equal([successor]);
      // Read where it was written: the other instance's client cache may lag by the bound.
      const at = statuses.indexOf(200) % 2 ? second : first;
      const read = await (await management(own.registration_client_uri.replace(first.issuer, at.origin), successor)).json() as { client_name: string };
      expect(read.client_name, 'the client as the update that won left it').to.equal(name);
    }
  });

  it('keeps a client an RFC 7592 DELETE was answered 204 for deleted, whatever update with its token ran at the same moment', async () => {
    const deleted: RegisteredClient[] = [];
    for (let round = 0; round < 4; round++) {
      const own = await registerClient(first.issuer, { client_name: 'Deleted While Updated' });
      const [removal, ...updates] = await Promise.all([
        management(own.registration_client_uri, own.registration_access_token, 'DELETE'),
        updateAt(second, own, own.registration_access_token, 'updated'),
        updateAt(first, own, own.registration_access_token, 'updated again'),
      ]);
      const statuses = [removal.status, ...updates.map(({ status }) => status)];
      expect(statuses.filter((status) => status === 204 || status === 200), `round ${round}: DELETE, PUT, PUT answered ${statuses}`).to.have.length(1);
      if (removal.status === 204) deleted.push(own);
    }
    await sleep(PROPAGATION_BOUND_MS + REQUEST_SLACK_MS);
    for (const own of deleted) {
      for (const server of [first, second]) {
        const token = await tokenRequest(server.origin, { grant_type: 'client_credentials', ...postCredentials(own) });
        expect([token.status, (await token.json() as { error: string }).error], `${own.client_id} at ${server.origin}`).to.deep.equal([401, 'invalid_client']);
      }
    }
  });

  it('serve one set of data API records: written at one instance, read, changed and deleted at the other; a revoked API key is refused by both', async () => {
    const workspaceId = user.workspaces[0]!.id;
    const { id: keyId, key } = await createApiKey(first, workspaceId, { name: 'shared' });
    const created = await api<{ data: { company: { id: string } } }>(first, '/rest/companies', { credential: key, json: { name: 'Shared Co' } });
    expect(created.status).to.equal(201);
    const path = `/rest/companies/${created.body.data.company.id}`;
    const read = await api<{ data: { company: { name: string } } }>(second, path, { credential: key });
    expect(read.body.data.company.name).to.equal('Shared Co');
    // Two updates of different fields, one at each instance at the same moment: both stay.
    const [a, b] = await Promise.all([
      api(first, path, { method: 'PATCH', credential: key, json: { city: 'Lyon' } }),
      api(second, path, { method: 'PATCH', credential: key, json: { employees: 9 } }),
    ]);
    expect([a.status, b.status]).to.deep.equal([200, 200]);
    const merged = await api<{ data: { company: Record<string, unknown> } }>(first, path, { credential: key });
    expect(merged.body.data.company).to.include({ name: 'Shared Co', city: 'Lyon', employees: 9 });
    expect((await api(second, path, { method: 'DELETE', credential: key })).status).to.equal(200);
    expect((await api(first, path, { credential: key })).status).to.equal(404);

    const revoked = await first.admin(['api-key', 'revoke', keyId]);
    expect(revoked.code, revoked.stderr).to.equal(0);
    for (const server of [first, second]) expect((await api(server, '/rest/companies', { credential: key })).status).to.equal(401);
  });
});

/** Two instances on one store, and a way to hold the store's writes back for a moment while reads go on. */
interface HeldStore {
  name: string;
  start(): Promise<{ first: TestServer; second: TestServer; holdWrites(ms: number): Promise<void>; stop(): Promise<void> }>;
}

// No rate limits: on Redis their counts are writes, which a pause would hold before the code is read.
const UNLIMITED = { KEY_ENCRYPTION_KEY, RATE_LIMITS: 'off' };

const HELD_STORES: HeldStore[] = [
  {
    name: 'one SQLite file, its write lock held by another process',
    async start() {
      const first = await startServer({ env: UNLIMITED });
      const second = await startServer({ store: first.store, env: { ...UNLIMITED, BASE_URL: first.issuer } });
      const holdWrites = async (ms: number) => {
        const other = new DatabaseSync(first.store.replace(/^sqlite:/, ''));
        other.exec('BEGIN IMMEDIATE');
        setTimeout(() => {
          other.exec('COMMIT');
          other.close();
        }, ms);
      };
      return { first, second, holdWrites, stop: async () => { await second.stop(); await first.stop(); } };
    },
  },
  {
    name: 'one Redis, its writes paused (CLIENT PAUSE WRITE)',
    async start() {
      const redis = await startRedis();
      const first = await startServer({ store: redis.url, env: UNLIMITED });
      const second = await startServer({ store: redis.url, env: { ...UNLIMITED, BASE_URL: first.issuer } });
      const control = await rawRedis(redis.url);
      const holdWrites = async (ms: number) => { await control.call('CLIENT', 'PAUSE', String(ms), 'WRITE'); };
      return { first, second, holdWrites, stop: async () => { control.disconnect(); await second.stop(); await first.stop(); await redis.stop(); } };
    },
  },
];

/**
 * Redemptions of one code that all read it unused and then meet at the store: its writes are held
 * back while they arrive, so every one but the first loses the code at the store itself, not by
 * finding it used.
 */
for (const held of HELD_STORES) describe(`redemptions of one code held at ${held.name}`, function () {
  this.timeout(60_000);

  let first: TestServer;
  let second: TestServer;
  let holdWrites: (ms: number) => Promise<void>;
  let stopAll: () => Promise<void>;
  let user: SeededUser;
  let app: RegisteredClient;

  before(async () => {
    ({ first, second, holdWrites, stop: stopAll } = await held.start());
    user = await seedUser(first);
    app = await registerClient(first.issuer, { client_name: 'Held App' });
  });

  after(async () => {
    await stopAll?.();
  });

  it('end the grant: its tokens, the winner\'s too, are refused (RFC 6749 4.1.2)', async () => {
    for (let round = 0; round < 2; round += 1) {
      // Tokens of the grant from an earlier code of the same browser session: the grant the racing code belongs to too.
      const browser = new UserAgent();
      const newCode = async () => {
        const { url, verifier } = codeRequest(first.origin, app.client_id, { scope: 'api profile' });
        const callback = await authorize(browser, url, first.origin, { email: user.email, password: user.password });
        return { code: callback.searchParams.get('code')!, verifier };
      };
      const earlier = await newCode();
      const before = await exchangeCode(first.origin, app, earlier.code, earlier.verifier);
      expect(before.status).to.equal(200);
      const earlierTokens = await before.json() as { access_token: string; refresh_token: string };

      const { code, verifier } = await newCode();
      await holdWrites(400);
      const responses = await Promise.all(Array.from({ length: 6 }, (_, i) => exchangeCode((i % 2 ? first : second).origin, app, code, verifier)));
      const statuses = responses.map(({ status }) => status);
      // One redemption uses the code up; the grant ends, so the winner may be refused too. Never two.
      expect(statuses.filter((status) => status === 200).length, `round ${round}: statuses ${statuses}`).to.be.at.most(1);
      for (const response of responses.filter(({ status }) => status !== 200)) {
        expect([response.status, (await response.json() as { error: string }).error], `round ${round}`).to.deep.equal([400, 'invalid_grant']);
      }
      const winner = responses.find(({ status }) => status === 200);
      const issued = [earlierTokens, ...(winner ? [await winner.json() as { access_token: string; refresh_token: string }] : [])];
      for (const tokens of issued) {
        const refreshed = await tokenRequest(first.origin, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(app) });
        expect(refreshed.status, `round ${round}: a refresh token of the grant`).to.equal(400);
        const userinfo = () => fetch(`${second.origin}/oauth/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
        await eventually(`round ${round}: an access token of the grant refused within the propagation bound`, async () => (await userinfo()).status === 401, PROPAGATION_BOUND_MS + 1000);
      }
    }
  });
});

/** A browser behind a load balancer: requests for the issuer's origin all reach one chosen instance. */
class BalancedAgent extends UserAgent {
  readonly #issuerOrigin: string;
  readonly #instanceOrigin: string;

  constructor(issuerOrigin: string, instanceOrigin: string) {
    super();
    this.#issuerOrigin = issuerOrigin;
    this.#instanceOrigin = instanceOrigin;
  }

  override request(url: string, init?: { method?: string; form?: Record<string, string> }): Promise<Response> {
    const routed = url.startsWith(`${this.#issuerOrigin}/`) ? `${this.#instanceOrigin}${url.slice(this.#issuerOrigin.length)}` : url;
    return super.request(routed, init);
  }
}
