import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { codeRequest, exchangeCode, register, registerClient, tokenRequest, postCredentials } from '../support/oauth.ts';
import { registerVettedClient, seedUser, startOnHeldPort, startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

const METRICS_TOKEN = 'scrape-token-0123456789abcdef';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text exposition, sample by sample (comments and blank lines skipped). */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of match[2]?.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g) ?? []) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample with this name and (at least) these labels; 0 when there is none. */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value ?? 0;
}

/** A scrape of the metrics listener (METRICS=local), or of the service's port with `at: 'public'`. */
async function scrape(server: TestServer, token: string | undefined = METRICS_TOKEN, at: 'local' | 'public' = 'local'): Promise<Sample[]> {
  const url = at === 'local' ? server.metrics : `${server.origin}/metrics`;
  const response = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  expect(response.status).to.equal(200);
  expect(response.headers.get('content-type')).to.equal('text/plain; version=0.0.4; charset=utf-8');
  return parseExposition(await response.text());
}

/** Follows an authorization request to the login page and submits a wrong password there. */
async function failSignIn(server: TestServer, clientId: string, email: string): Promise<{ status: number; uid: string }> {
  const agent = new UserAgent();
  const { url, response } = await agent.follow(codeRequest(server.issuer, clientId).url, server.origin);
  const html = await response.text();
  const action = /<form method="post" action="([^"]+)"/.exec(html)?.[1];
  const csrf = /name="csrf" value="([^"]*)"/.exec(html)?.[1];
  if (!action || !csrf) throw new Error(`no login form at ${url}`);
  const answer = await agent.request(new URL(action, server.origin).href, { form: { csrf, email, password: 'not the password' } });
  return { status: answer.status, uid: /\/interaction\/([^/]+)\/login/.exec(action)![1]! };
}

/** A GET on a new connection: with WORKERS above 1, connections go to the workers in turn. */
function getOnNewConnection(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { agent: false, headers }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => { body += chunk; });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    }).on('error', reject).end();
  });
}

const ROUTE_LABEL = /^(other|\/[\w./-]*(\/:[a-zA-Z]+[\w/-]*)*)$/;

describe('metrics (/metrics, Prometheus text format)', function () {
  this.timeout(60_000);

  let server: TestServer;
  let off: TestServer;
  let open: TestServer;
  let onPublicPort: TestServer;

  before(async () => {
    [server, off, open, onPublicPort] = await Promise.all([
      startServer({ env: { METRICS_TOKEN } }),
      startServer({ env: { METRICS: 'off' } }),
      // Low limits, so a refusal is quick to provoke.
      startServer({ env: { RATE_LIMIT_REGISTRATION: '1/1h' } }),
      startServer({ env: { METRICS: 'public', METRICS_TOKEN } }),
    ]);
  });

  after(async () => {
    await Promise.all([server?.stop(), off?.stop(), open?.stop(), onPublicPort?.stop()]);
  });

  it('counts requests by route template, tokens by grant type, OAuth errors by code, failed sign-ins and store operations, with no id in any label', async () => {
    const user = await seedUser(server);
    const machine = await registerVettedClient(server, { client_name: 'Metrics Sync', grant_types: ['client_credentials'], redirect_uris: [] });
    expect((await tokenRequest(server.issuer, { grant_type: 'client_credentials', ...postCredentials(machine) })).status).to.equal(200);

    const app = await registerClient(server.issuer, { client_name: 'Metrics App' });
    expect((await fetch(app.registration_client_uri, { headers: { authorization: `Bearer ${app.registration_access_token}` } })).status).to.equal(200);
    const failed = await failSignIn(server, app.client_id, user.email);
    expect(failed.status).to.equal(400);
    const { url, verifier } = codeRequest(server.issuer, app.client_id);
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    const code = callback.searchParams.get('code')!;
    const exchanged = await exchangeCode(server.issuer, app, code, verifier);
    expect(exchanged.status).to.equal(200);
    const { access_token: accessToken, refresh_token: refreshToken } = await exchanged.json() as { access_token: string; refresh_token: string };
    const recordId = randomUUID();
    const api = (path: string) => fetch(`${server.issuer}/rest/${path}`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect((await api('companies')).status).to.equal(200);
    expect((await api(`companies/${recordId}`)).status).to.equal(404);
    // Refused by the data API's authentication, before its route ran: counted under that route all the same.
    expect((await fetch(`${server.issuer}/rest/companies`, { headers: { authorization: 'Bearer made-up' } })).status).to.equal(401);
    // A replayed code: invalid_grant (and the grant is revoked).
    const replayed = await exchangeCode(server.issuer, app, code, verifier);
    expect(replayed.status).to.equal(400);
    expect(await replayed.json()).to.include({ error: 'invalid_grant' });
    expect((await fetch(`${server.origin}/no/such/${recordId}`)).status).to.equal(404);
    // An authorization error reaches the user as a page (the client registered itself), not as JSON.
    const badScope = await fetch(codeRequest(server.issuer, app.client_id, { scope: 'api no-such-scope' }).url, { redirect: 'manual' });
    expect(badScope.status).to.equal(400);

    const response = await fetch(server.metrics, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(response.status).to.equal(200);
    const text = await response.text();
    const samples = parseExposition(text);

    expect(valueOf(samples, 'oauth_tokens_issued_total', { grant_type: 'client_credentials' })).to.equal(1);
    expect(valueOf(samples, 'oauth_tokens_issued_total', { grant_type: 'authorization_code' })).to.equal(1);
    expect(valueOf(samples, 'oauth_tokens_issued_total', { grant_type: 'refresh_token' })).to.equal(0);
    expect(valueOf(samples, 'oauth_errors_total', { route: '/oauth/token', error: 'invalid_grant' })).to.equal(1);
    expect(valueOf(samples, 'oauth_errors_total', { route: '/oauth/authorize', error: 'invalid_scope' })).to.equal(1);
    expect(valueOf(samples, 'login_failures_total', { reason: 'invalid_credentials' })).to.equal(1);
    expect(valueOf(samples, 'http_requests_total', { route: '/oauth/token', method: 'POST', status: '200' })).to.equal(2);
    expect(valueOf(samples, 'http_requests_total', { route: '/oauth/token', method: 'POST', status: '400' })).to.equal(1);
    expect(valueOf(samples, 'http_requests_total', { route: '/interaction/:uid/login', method: 'POST', status: '400' })).to.equal(1);
    expect(valueOf(samples, 'http_requests_total', { route: '/rest/companies', method: 'GET', status: '200' })).to.equal(1);
    expect(valueOf(samples, 'http_requests_total', { route: '/rest/companies/:id', method: 'GET', status: '404' })).to.equal(1);
    expect(valueOf(samples, 'http_requests_total', { route: '/rest/companies', method: 'GET', status: '401' })).to.equal(1);
    expect(valueOf(samples, 'http_requests_total', { route: '/oauth/register/:clientId', method: 'GET', status: '200' })).to.equal(1);
    expect(valueOf(samples, 'http_requests_total', { route: 'other', method: 'GET', status: '404' })).to.equal(1);
    // Latency histograms of the token endpoint and the data API: every request in the +Inf bucket.
    expect(valueOf(samples, 'http_request_duration_seconds_count', { route: '/oauth/token', method: 'POST' })).to.equal(3);
    expect(valueOf(samples, 'http_request_duration_seconds_bucket', { route: '/oauth/token', method: 'POST', le: '+Inf' })).to.equal(3);
    expect(valueOf(samples, 'http_request_duration_seconds_count', { route: '/rest/companies/:id', method: 'GET' })).to.equal(1);
    // Store operations: the sign-ins looked the user up, the code was consumed once and refused once.
    expect(valueOf(samples, 'store_operation_duration_seconds_count', { facet: 'accounts', operation: 'findUserByEmail' })).to.be.at.least(2);
    expect(valueOf(samples, 'store_operation_duration_seconds_count', { facet: 'AuthorizationCode', operation: 'consume' })).to.be.at.least(1);
    expect(valueOf(samples, 'store_operation_duration_seconds_count', { facet: 'store', operation: 'committed' })).to.be.at.least(10);
    expect(valueOf(samples, 'process_cpu_seconds_total')).to.be.above(0);

    // Bounded labels: route templates only, and none of the values this flow made.
    for (const { labels } of samples) {
      if (labels.route !== undefined) expect(labels.route).to.match(ROUTE_LABEL);
    }
    const secrets = [machine.client_id, app.client_id, user.id, user.email, user.workspaces[0]!.id, failed.uid, recordId, code, accessToken, refreshToken, app.client_secret!];
    for (const value of secrets) expect(text, value).to.not.contain(value);
  });

  it('on the metrics listener, refuses a scrape without the METRICS_TOKEN (401, Bearer challenge) or with another token (401 invalid_token)', async () => {
    const missing = await fetch(server.metrics);
    expect(missing.status).to.equal(401);
    expect(missing.headers.get('www-authenticate')).to.equal('Bearer realm="metrics"');
    expect(await missing.text()).to.not.contain('http_requests_total');

    const wrong = await fetch(server.metrics, { headers: { authorization: `Bearer ${METRICS_TOKEN}x` } });
    expect(wrong.status).to.equal(401);
    expect(wrong.headers.get('www-authenticate')).to.equal('Bearer realm="metrics", error="invalid_token"');
    expect(await wrong.json()).to.include({ error: 'invalid_token' });

    const basic = await fetch(server.metrics, { headers: { authorization: `Basic ${Buffer.from(`x:${METRICS_TOKEN}`).toString('base64')}` } });
    expect(basic.status).to.equal(401);

    const samples = await scrape(server);
    expect(valueOf(samples, 'http_requests_total', { route: '/metrics', method: 'GET', status: '401' }), 'the listener\'s answers are not the service\'s requests').to.equal(0);
  });

  it('with METRICS=public are served on the service\'s port, with the METRICS_TOKEN, and no metrics listener is opened', async () => {
    const missing = await fetch(`${onPublicPort.origin}/metrics`);
    expect(missing.status).to.equal(401);
    expect(missing.headers.get('www-authenticate')).to.equal('Bearer realm="metrics"');

    const samples = await scrape(onPublicPort, METRICS_TOKEN, 'public');
    expect(valueOf(samples, 'http_requests_total', { route: '/metrics', method: 'GET', status: '401' })).to.equal(1);
    let refused: unknown;
    await fetch(onPublicPort.metrics).catch((error: unknown) => { refused = error; });
    expect(refused, 'nothing listens on METRICS_PORT').to.be.instanceOf(TypeError);
    expect(onPublicPort.logs()).to.not.contain('metrics listening');
  });

  it('with METRICS=off there is no /metrics: 404 on the service\'s port, and no metrics listener', async () => {
    const response = await fetch(`${off.origin}/metrics`);
    expect(response.status).to.equal(404);
    expect(await response.text()).to.not.contain('http_requests_total');
    let refused: unknown;
    await fetch(off.metrics).catch((error: unknown) => { refused = error; });
    expect(refused, 'nothing listens on METRICS_PORT').to.be.instanceOf(TypeError);
  });

  it('without METRICS_TOKEN anyone may scrape; scrapes stay out of the info log; a rate-limit refusal is counted with its OAuth error', async () => {
    expect((await register(open.issuer, { client_name: 'First' })).status).to.equal(201);
    const refused = await register(open.issuer, { client_name: 'Second' });
    expect(refused.status).to.equal(429);

    const samples = await scrape(open, undefined);
    expect(valueOf(samples, 'rate_limit_refusals_total', { route: '/oauth/register' })).to.equal(1);
    expect(valueOf(samples, 'oauth_errors_total', { route: '/oauth/register', error: 'temporarily_unavailable' })).to.equal(1);
    expect(valueOf(samples, 'http_requests_total', { route: '/oauth/register', method: 'POST', status: '429' })).to.equal(1);

    await fetch(`${open.origin}/.well-known/openid-configuration`);
    for (const deadline = Date.now() + 3000; !open.logs().includes('"path":"/.well-known/openid-configuration"') && Date.now() < deadline;) await sleep(50);
    expect(open.logs(), 'other requests are logged').to.contain('"path":"/.well-known/openid-configuration"');
    expect(open.logs()).to.not.contain('"path":"/metrics"');
  });
  // Last: its requests to the service's port would be counted and logged by the tests above.
  it('by default are served on a listener of their own on loopback, not on the service\'s port (404 there, token or not)', async () => {
    for (const headers of [{}, { authorization: `Bearer ${METRICS_TOKEN}` }] as Array<Record<string, string>>) {
      const response = await fetch(`${server.origin}/metrics`, { headers });
      expect(response.status).to.equal(404);
      expect(await response.text()).to.not.contain('http_requests_total');
    }
    expect((await fetch(`${open.origin}/metrics`)).status).to.equal(404);

    expect(valueOf(await scrape(open, undefined), 'process_cpu_seconds_total')).to.be.above(0);
    const listening = open.logs().split('\n').filter((line) => line.includes('"message":"metrics listening"')).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(listening).to.have.length(1);
    expect(listening[0]).to.include({ host: '127.0.0.1', port: Number(new URL(open.metrics).port), url: open.metrics });
    // The listener serves nothing else.
    const other = await fetch(new URL('/.well-known/openid-configuration', open.metrics));
    expect(other.status).to.equal(404);
    expect(await other.json()).to.include({ error: 'not_found' });
    expect((await fetch(open.metrics, { method: 'POST' })).status).to.equal(405);
  });

  it('counts a request whose client went away before the answer as status 499, and as no OAuth error', async () => {
    const route = { route: '/oauth/token', method: 'POST' };
    const before = await scrape(server);
    await new Promise<void>((resolve) => {
      const req = request(`${server.issuer}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '100' } });
      req.on('error', () => resolve());
      req.write('grant_type=client_cre');
      setTimeout(() => req.destroy(), 200);
    });
    const counted = await eventually('the request counted', async () => {
      const after = await scrape(server);
      return valueOf(after, 'http_requests_total', { ...route, status: '499' }) > valueOf(before, 'http_requests_total', { ...route, status: '499' }) ? after : undefined;
    }, 5_000, 100);
    expect(valueOf(counted, 'http_requests_total', { ...route, status: '400' })).to.equal(valueOf(before, 'http_requests_total', { ...route, status: '400' }));
    expect(valueOf(counted, 'oauth_errors_total', { route: '/oauth/token', error: 'invalid_request' })).to.equal(valueOf(before, 'oauth_errors_total', { route: '/oauth/token', error: 'invalid_request' }));
  });
});

for (const where of ['local', 'public'] as const) {
  describe(`metrics with WORKERS=2 and METRICS=${where}: a scrape shows every worker's counts, ${where === 'local' ? 'from the supervisor\'s metrics listener' : 'whichever worker answers it'}`, function () {
    this.timeout(60_000);

    let server: TestServer;
    /** Seconds since 1970, before the workers started. */
    let startedAt: number;

    before(async () => {
      startedAt = Date.now() / 1000;
      server = await startServer({ env: { WORKERS: '2', METRICS: where } });
    });

    after(async () => {
      await server?.stop();
    });

    it('sums the workers\' counters', async () => {
      // Both workers serving (each logs that it listens), so connections alternate between them.
      for (const deadline = Date.now() + 10_000; (server.logs().match(/"message":"listening"/g) ?? []).length < 2;) {
        if (Date.now() > deadline) throw new Error('two workers did not start');
        await sleep(100);
      }
      expect(execFileSync('pgrep', ['-P', String(server.pid())], { encoding: 'utf8' }).trim().split('\n')).to.have.length(2);
      const requests = 8;
      for (let i = 0; i < requests; i += 1) expect((await getOnNewConnection(`${server.issuer}/oauth/jwks`)).status).to.equal(200);

      const url = where === 'local' ? server.metrics : `${server.origin}/metrics`;
      const totals = [];
      for (let i = 0; i < 6; i += 1) {
        const { status, body } = await getOnNewConnection(url);
        expect(status).to.equal(200);
        totals.push(valueOf(parseExposition(body), 'http_requests_total', { route: '/oauth/jwks', method: 'GET', status: '200' }));
      }
      expect(totals).to.deep.equal(Array(6).fill(requests));
      if (where === 'local') {
        expect((await getOnNewConnection(`${server.origin}/metrics`)).status, 'not on the service\'s port').to.equal(404);
        expect(server.logs().match(/"message":"metrics listening"/g), 'one listener, the supervisor\'s').to.have.length(1);
      }
    });

    it('gives a process\'s limits and start time as one process\'s, not the sum of the workers\' (process_max_fds, process_open_fds, process_start_time_seconds)', async () => {
      const url = where === 'local' ? server.metrics : `${server.origin}/metrics`;
      // Both workers serving (each logs that it listens), so that both report.
      await eventually('two workers listening', () => (server.logs().match(/"message":"listening"/g) ?? []).length >= 2, 10_000, 100);
      const workers = execFileSync('pgrep', ['-P', String(server.pid())], { encoding: 'utf8' }).trim().split('\n').map(Number);
      expect(workers).to.have.length(2);
      const { status, body } = await getOnNewConnection(url);
      expect(status).to.equal(200);
      const samples = parseExposition(body);
      const openFiles = await Promise.all(workers.map(async (pid) => (await readdir(`/proc/${pid}/fd`)).length));
      const limits = await Promise.all(workers.map(async (pid) => Number(/^Max open files\s+(\d+)/m.exec(await readFile(`/proc/${pid}/limits`, 'utf8'))?.[1])));

      expect(valueOf(samples, 'process_max_fds'), 'a worker\'s limit on open files').to.equal(Math.min(...limits));
      // The fullest worker's count, give or take the files it opened or closed since (connections).
      expect(valueOf(samples, 'process_open_fds'), `open files of ${openFiles.join(' and ')}`).to.be.within(1, Math.max(...openFiles) + 5);
      const started = samples.filter(({ name }) => name === 'process_start_time_seconds');
      expect(started, 'one start time').to.have.length(1);
      expect(started[0]!.value, 'when the workers started, in seconds since 1970').to.be.within(startedAt - 5, Date.now() / 1000);
      expect(valueOf(samples, 'nodejs_version_info', { version: process.version }), 'one Node.js, not one per worker').to.equal(1);
    });

    it('keeps a replaced worker\'s counts in the sums, so a counter never goes down', async () => {
      const url = where === 'local' ? server.metrics : `${server.origin}/metrics`;
      const jwksRequests = async () => {
        const { status, body } = await getOnNewConnection(url);
        expect(status).to.equal(200);
        return valueOf(parseExposition(body), 'http_requests_total', { route: '/oauth/jwks', method: 'GET', status: '200' });
      };
      for (let i = 0; i < 4; i += 1) expect((await getOnNewConnection(`${server.issuer}/oauth/jwks`)).status).to.equal(200);
      const before = await jwksRequests();
      expect(before).to.be.at.least(4);
      // The worker to replace: one that answered some of them (each line names its process).
      const answeredBy = server.logs().split('\n').filter((line) => line.includes('"path":"/oauth/jwks"')).map((line) => (JSON.parse(line) as { pid: number }).pid);
      const workers = execFileSync('pgrep', ['-P', String(server.pid())], { encoding: 'utf8' }).trim().split('\n').map(Number);
      const victim = workers.find((pid) => answeredBy.includes(pid))!;
      process.kill(victim, 'SIGKILL');
      await eventually('a replacement worker listening', () => {
        const now = execFileSync('pgrep', ['-P', String(server.pid())], { encoding: 'utf8' }).trim().split('\n').map(Number);
        return now.length === 2 && !now.includes(victim) && (server.logs().match(/"message":"listening"/g) ?? []).length === 3 ? true : undefined;
      }, 20_000, 100);
      expect(await jwksRequests(), 'the replaced worker\'s requests still counted').to.equal(before);
      // Connections go to either worker, the new one included.
      for (let i = 0; i < 4; i += 1) expect((await getOnNewConnection(`${server.issuer}/oauth/jwks`)).status).to.equal(200);
      expect(await jwksRequests()).to.equal(before + 4);
    });
  });
}

describe('a port another process holds', function () {
  this.timeout(30_000);

  it('stops the service at start with one line naming METRICS_PORT, no stack trace', async () => {
    const { port, code, stderr } = await startOnHeldPort((held) => ({ PORT: '0', METRICS_PORT: String(held) }));
    expect(code).to.equal(1);
    expect(stderr.trim()).to.equal(`configuration error: METRICS_HOST, METRICS_PORT: 127.0.0.1 port ${port} is in use by another process (EADDRINUSE)`);
  });

  it('stops the service at once with one line naming PORT, though the metrics listener had started', async () => {
    const { port, code, stderr } = await startOnHeldPort((held) => ({ PORT: String(held), METRICS_PORT: '0', LOG_LEVEL: 'silent' }));
    expect(code, 'exited by itself, non-zero').to.equal(1);
    expect(stderr.trim()).to.equal(`configuration error: PORT, HOST: 127.0.0.1 port ${port} is in use by another process (EADDRINUSE)`);
  });
});
