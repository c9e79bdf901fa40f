import { readFile } from 'node:fs/promises';
import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';

import { codeRequest, exchangeCode, management, postCredentials, register, registerClient, tokenRequest } from '../support/oauth.ts';
import type { RedisClient } from '../../adapters/redis/connection.ts';
import { rawRedis, redisCli, startRedis, type RedisServer } from '../support/redis.ts';
import { createApiKey } from '../support/data_api.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize, field, formAction } from '../support/user_agent.ts';
import { eventually, sleep } from '../support/wait.ts';

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 9).toString('base64url');

/** The service's log lines (JSON) written for the request with this id. */
function linesOf(server: TestServer, requestId: string): Array<Record<string, unknown>> {
  return server.logs().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.request_id === requestId);
}

/** The resident memory of a process, in MiB. */
async function rssMiB(pid: number): Promise<number> {
  const kib = Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return kib / 1024;
}

/** The service on Redis while Redis goes away and comes back (AOF on, so what was stored survives). */
describe('a Redis outage', function () {
  this.timeout(60_000);

  let redis: RedisServer;
  let server: TestServer;

  before(async () => {
    redis = await startRedis(['--appendonly', 'yes', '--appendfsync', 'always']);
    server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY } });
  });

  after(async () => {
    await server?.stop();
    await redis?.stop();
  });

  it('answers 503 with Retry-After while Redis is down, recovers by itself, and a code issued before still redeems exactly once', async () => {
    const pid = server.pid()!;
    const user = await seedUser(server);
    const client = await registerClient(server.issuer, { client_name: 'Outage App' });
    const { url, verifier } = codeRequest(server.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    const code = callback.searchParams.get('code')!;

    await redis.down();
    const started = Date.now();
    const token = await exchangeCode(server.issuer, client, code, verifier);
    expect(Date.now() - started, 'answered quickly, not hung').to.be.below(5000);
    expect(token.status).to.equal(503);
    expect(token.headers.get('retry-after')).to.match(/^\d+$/);
    // With the id to quote, which the request's log lines carry.
    expect(await token.json()).to.include({ error: 'temporarily_unavailable', request_id: token.headers.get('x-request-id') });

    const page = await fetch(codeRequest(server.issuer, client.client_id).url, { headers: { accept: 'text/html' } });
    expect(page.status).to.equal(503);
    expect(page.headers.get('content-type')).to.contain('text/html');
    const html = await page.text();
    expect(html).to.not.match(/\bat .+\.(ts|js):\d+/);

    // A burst while Redis is down: every request refused at once, nothing queued up to wait for Redis.
    const before = await rssMiB(pid);
    const burstStarted = Date.now();
    const burst = await Promise.all(Array.from({ length: 300 }, () => exchangeCode(server.issuer, client, 'some-code', verifier)));
    expect(new Set(burst.map(({ status }) => status))).to.deep.equal(new Set([503]));
    expect(Date.now() - burstStarted, '300 refusals, not a queue').to.be.below(10_000);
    expect(await rssMiB(pid) - before, 'MiB grown during the burst').to.be.below(64);

    // Alive (an orchestrator must not restart it for the store's sake), but not ready for traffic.
    const health = await fetch(`${server.origin}/healthz`);
    expect(health.status).to.equal(200);
    const readiness = await fetch(`${server.origin}/readyz`);
    expect(readiness.status).to.equal(503);
    expect(await readiness.json()).to.include({ status: 'not ready', store: 'unavailable', keys: 'loaded', error: 'temporarily_unavailable' });

    await redis.up();
    const deadline = Date.now() + 15_000;
    while ((await fetch(`${server.origin}/readyz`)).status !== 200) {
      if (Date.now() > deadline) throw new Error('the service did not recover after Redis came back');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }

    expect(await (await fetch(`${server.origin}/readyz`)).json()).to.include({ status: 'ready', keys: 'loaded' });
    const redeemed = await exchangeCode(server.issuer, client, code, verifier);
    expect(redeemed.status, 'the code issued before the outage').to.equal(200);
    const again = await exchangeCode(server.issuer, client, code, verifier);
    expect(again.status).to.equal(400);
    expect(server.pid(), 'the same process served throughout: it never crashed or restarted').to.equal(pid);
    expect(() => process.kill(pid, 0)).to.not.throw();
  });

  it('logs each request answered 503 while Redis is down once, as a warning naming why the store refused, with no stack trace (the outage is no fault of the service)', async () => {
    const client = await registerClient(server.issuer, { client_name: 'Logged Outage App' });
    await redis.down();
    let requestIds: string[];
    try {
      const answers = [
        await exchangeCode(server.issuer, client, 'some-code', codeRequest(server.issuer, client.client_id).verifier),
        await register(server.issuer, { client_name: 'Registered While Down' }),
      ];
      expect(answers.map(({ status }) => status)).to.deep.equal([503, 503]);
      requestIds = answers.map((answer) => answer.headers.get('x-request-id')!);
      // The log is written asynchronously: the request line (the last of a request's) may come a moment after the answer.
      await eventually('the requests\' lines', () => requestIds.every((id) => linesOf(server, id).some((line) => line.message === 'request')), 5_000);
    } finally {
      await redis.up();
    }
    for (const id of requestIds) {
      const lines = linesOf(server, id);
      const failed = lines.filter((line) => line.message !== 'request');
      expect(failed.map(({ level, message }) => [level, message]), JSON.stringify(lines)).to.deep.equal([['warn', 'request failed']]);
      expect(failed[0], 'the store\'s refusal named').to.include({ status: 503, error: 'BackendUnavailableError' })
        .and.have.property('detail').that.matches(/Redis/);
      expect(failed[0], 'no stack: nothing of the service failed').to.not.have.property('stack');
      expect(lines.filter((line) => line.level === 'error'), 'no error line').to.deep.equal([]);
    }
    await eventually('ready again', async () => (await fetch(`${server.origin}/readyz`)).status === 200);
  });

  it('while Redis hangs (connections open, nothing answered), /readyz answers 503 at once rather than hang, and /healthz 200', async () => {
    redis.pause();
    try {
      // A prober gives up after a few seconds; the answer must come before that.
      const readiness = await fetch(`${server.origin}/readyz`, { signal: AbortSignal.timeout(5000) });
      expect(readiness.status).to.equal(503);
      expect(await readiness.json()).to.include({ status: 'not ready', store: 'unavailable' });
      expect((await fetch(`${server.origin}/healthz`, { signal: AbortSignal.timeout(5000) })).status).to.equal(200);
    } finally {
      redis.resume();
    }
    const deadline = Date.now() + 15_000;
    while ((await fetch(`${server.origin}/readyz`)).status !== 200) {
      if (Date.now() > deadline) throw new Error('not ready again after Redis resumed');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });

  it('is not ready while Redis answers but refuses writes (a master demoted to a replica, too few replicas for min-replicas-to-write, out of memory), saying so; ready again once it takes them', async () => {
    const readiness = async () => {
      const response = await fetch(`${server.origin}/readyz`);
      return { status: response.status, body: await response.json() as Record<string, unknown> };
    };
    const untilReady = async () => {
      const deadline = Date.now() + 15_000;
      while ((await readiness()).status !== 200) {
        if (Date.now() > deadline) throw new Error('not ready again once Redis took writes');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };
    const refusals: Array<[string[], string[], string]> = [
      // A master nothing answers at: the demoted one stays a replica, refusing writes.
      [['REPLICAOF', '127.0.0.1', '9'], ['REPLICAOF', 'NO', 'ONE'], 'READONLY'],
      [['CONFIG', 'SET', 'min-replicas-to-write', '1'], ['CONFIG', 'SET', 'min-replicas-to-write', '0'], 'NOREPLICAS'],
      // Full, under the default noeviction policy.
      [['CONFIG', 'SET', 'maxmemory', '1'], ['CONFIG', 'SET', 'maxmemory', '0'], 'OOM'],
    ];
    for (const [refuse, restore, word] of refusals) {
      await redisCli(redis.port, ...refuse);
      try {
        const refused = await readiness();
        expect(refused.status, word).to.equal(503);
        expect(refused.body, word).to.include({ status: 'not ready', store: 'unavailable', error_description: `the Redis store answers but refuses what the service asks of it (${word})` });
        expect((await fetch(`${server.origin}/healthz`)).status, `${word}: alive all the same`).to.equal(200);
      } finally {
        await redisCli(redis.port, ...restore);
      }
      await untilReady();
    }
  });

  it('answers a person who sends the sign-in form while Redis is down with the page saying the service is unavailable, and signs them in once it is back', async () => {
    const user = await seedUser(server);
    const client = await registerClient(server.issuer, { client_name: 'Sign-in Outage App' });
    const agent = new UserAgent({ accept: 'text/html' });
    const { url } = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
    const html = await (await agent.request(url)).text();
    const form = { csrf: field(html, 'csrf')!, email: user.email, password: user.password };
    const action = new URL(formAction(html)!, server.origin).href;

    await redis.down();
    let during: Response;
    try {
      during = await agent.request(action, { form });
    } finally {
      await redis.up();
    }
    expect(during.status).to.equal(503);
    expect(during.headers.get('retry-after')).to.match(/^\d+$/);
    expect(during.headers.get('content-type')).to.contain('text/html');
    const page = await during.text();
    expect(page).to.include('<h1>Service unavailable</h1>').and.include(`Reference: <code>${during.headers.get('x-request-id')}</code>`);
    expect(page).to.not.match(/\bat .+\.(ts|js):\d+/);

    await eventually('ready again', async () => (await fetch(`${server.origin}/readyz`)).status === 200);
    const signedIn = await agent.request(action, { form });
    expect(signedIn.status, 'the same form, sent again').to.equal(303);
  });

  it('answers a form posted to the authorization endpoint while Redis is down with the page saying the service is unavailable (503), and the handle of one posted before serves once Redis is back', async () => {
    const client = await registerClient(server.issuer, { client_name: 'Posted Form App' });
    const post = () => fetch(`${server.issuer}/oauth/authorize`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      body: new URLSearchParams(codeRequest(server.issuer, client.client_id).params).toString(),
      redirect: 'manual',
    });
    const before = await post();
    expect(before.status).to.equal(303);
    const parked = before.headers.get('location')!;

    await redis.down();
    try {
      for (const during of [await post(), await fetch(parked, { redirect: 'manual' })]) {
        expect(during.status).to.equal(503);
        expect(during.headers.get('retry-after')).to.match(/^\d+$/);
        expect(during.headers.get('content-type')).to.contain('text/html');
        expect(await during.text(), 'the store unavailable, not an unreadable form').to.include('<h1>Service unavailable</h1>').and.include('Try again in a moment.');
      }
    } finally {
      await redis.up();
    }
    await eventually('ready again', async () => (await fetch(`${server.origin}/readyz`)).status === 200);
    const after = await fetch(parked, { redirect: 'manual' });
    expect(after.status).to.equal(303);
    expect(after.headers.get('location')).to.match(/\/interaction\/[\w-]+$/);
  });
});

/**
 * Redis applying a write after the service gave up waiting for its answer: its writes paused
 * (CLIENT PAUSE WRITE) for longer than the command timeout, as a slow fork, a full disk or a
 * failover can hold them. The redemption is answered 503, and Redis then uses the code or refresh
 * token up under a claim no request holds.
 */
describe('a Redis that applies a redemption after its answer timed out', function () {
  this.timeout(60_000);

  let redis: RedisServer;
  let server: TestServer;
  let control: RedisClient;

  before(async () => {
    redis = await startRedis();
    server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY, RATE_LIMITS: 'off' } });
    control = await rawRedis(redis.url);
  });

  after(async () => {
    control?.disconnect();
    await server?.stop();
    await redis?.stop();
  });

  /** `redeem` while Redis holds writes for longer than the service waits for an answer, then again once they are applied. */
  async function pausedThenRetried(redeem: () => Promise<Response>): Promise<Response> {
    await control.call('CLIENT', 'PAUSE', '1600', 'WRITE');
    const refused = await redeem();
    expect(refused.status).to.equal(503);
    expect((await refused.json() as { error: string }).error).to.equal('temporarily_unavailable');
    await sleep(2200);
    return redeem();
  }

  it('gives the code and the refresh token back: the retry once Redis answers redeems them, not a replay, nor a wait for a request that is gone', async () => {
    const user = await seedUser(server);
    const app = await registerClient(server.issuer, { client_name: 'Paused App' });
    const { url, verifier } = codeRequest(server.issuer, app.client_id);
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    const code = callback.searchParams.get('code')!;

    const exchanged = await pausedThenRetried(() => exchangeCode(server.issuer, app, code, verifier));
    expect(exchanged.status, await exchanged.clone().text()).to.equal(200);
    const tokens = await exchanged.json() as { refresh_token: string };

    const refresh = () => tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(app) });
    const refreshed = await pausedThenRetried(refresh);
    expect(refreshed.status, await refreshed.clone().text()).to.equal(200);
    // The grant lives on: its new refresh token works.
    const next = await refreshed.json() as { refresh_token: string };
    expect((await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: next.refresh_token, ...postCredentials(app) })).status).to.equal(200);
  });
});

/** The service on its embedded store while another process (a worker, the admin CLI, a `sqlite3` shell) holds the file's write lock. */
describe('the embedded store while another process holds its write lock', function () {
  this.timeout(60_000);

  let server: TestServer;

  before(async () => {
    server = await startServer();
  });

  after(async () => {
    await server?.stop();
  });

  it('keeps answering what needs no write, and answers a write once the lock is free', async () => {
    const other = new DatabaseSync(server.store.replace(/^sqlite:/, ''));
    try {
      other.exec('BEGIN IMMEDIATE');
      let registered: Response | undefined;
      const registration = register(server.issuer, { client_name: 'Waits Its Turn' }).then((response) => { registered = response; });
      await sleep(300);
      expect((await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).status).to.equal(200);
      expect((await fetch(`${server.origin}/readyz`)).status).to.equal(200);
      expect(registered, 'the registration was answered while the lock was held').to.equal(undefined);
      other.exec('COMMIT');
      await registration;
      expect(registered!.status).to.equal(201);
      const client = await registered!.json() as { client_name: string; registration_client_uri: string; registration_access_token: string };
      const stored = await management(client.registration_client_uri, client.registration_access_token);
      expect(stored.status, 'the client was stored').to.equal(200);
      expect(await stored.json()).to.include({ client_name: 'Waits Its Turn' });
    } finally {
      if (other.isTransaction) other.exec('ROLLBACK');
      other.close();
    }
  });

  it('lets a browser client read the Retry-After of a 503 (CORS exposes it): registration and the data API', async () => {
    const user = await seedUser(server);
    const { key } = await createApiKey(server, user.workspaces[0]!.id);
    const other = new DatabaseSync(server.store.replace(/^sqlite:/, ''));
    try {
      other.exec('BEGIN IMMEDIATE');
      const fromPage = { origin: 'https://app.example', 'content-type': 'application/json' };
      const answers = await Promise.all([
        fetch(`${server.issuer}/oauth/register`, { method: 'POST', headers: fromPage, body: JSON.stringify({ client_name: 'From A Page', redirect_uris: ['https://app.example/cb'] }) }),
        fetch(`${server.issuer}/rest/companies`, { method: 'POST', headers: { ...fromPage, authorization: `Bearer ${key}` }, body: JSON.stringify({ name: 'From A Page' }) }),
      ]);
      for (const [i, answer] of answers.entries()) {
        expect(answer.status, `answer ${i}`).to.equal(503);
        expect(answer.headers.get('retry-after'), `answer ${i}`).to.match(/^\d+$/);
        expect(answer.headers.get('access-control-allow-origin'), `answer ${i}`).to.equal('*');
        const exposed = (answer.headers.get('access-control-expose-headers') ?? '').split(',').map((name) => name.trim().toLowerCase());
        expect(exposed, `answer ${i}`).to.include('retry-after');
      }
    } finally {
      if (other.isTransaction) other.exec('ROLLBACK');
      other.close();
    }
  });

  it('refuses a write held up 5 s as the store unavailable, says why in the log, and writes again once the lock is free', async () => {
    const other = new DatabaseSync(server.store.replace(/^sqlite:/, ''));
    try {
      other.exec('BEGIN IMMEDIATE');
      const refused = await register(server.issuer, { client_name: 'Held Up' });
      expect(refused.status).to.equal(503);
      expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
      expect(await refused.json()).to.include({ error: 'temporarily_unavailable' });
      // The log is written asynchronously: its line may come a moment after the answer.
      await eventually('the reason in the log', () => server.logs().includes('another process held the database\'s write lock for 5000 ms'), 5_000);
      other.exec('COMMIT');
      expect((await register(server.issuer, { client_name: 'After It' })).status).to.equal(201);
    } finally {
      if (other.isTransaction) other.exec('ROLLBACK');
      other.close();
    }
  });
});
