import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { codeRequest, registerClient, tokenRequest } from '../support/oauth.ts';
import { clientCredentialsToken, createApiKey } from '../support/data_api.ts';
import { freePorts, seedUser, startServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/wait.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The server's JSON log lines that carry this request id; the log is written asynchronously, so they may take a moment. */
async function linesWithId(server: TestServer, id: string, atLeast = 1): Promise<Array<Record<string, unknown>>> {
  for (const deadline = Date.now() + 3000; ; await sleep(50)) {
    const lines = server.logs().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.request_id === id);
    if (lines.length >= atLeast || Date.now() > deadline) return lines;
  }
}

/** Sends a request as raw bytes (fetch refuses to send a malformed header); the status line's code. */
function rawRequest(port: number, head: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = connect(port, '127.0.0.1', () => socket.write(head));
    socket.on('data', (chunk) => { answer += chunk.toString(); });
    socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1])));
    socket.on('error', reject);
  });
}

describe('logs: a request id on every line and answer', function () {
  this.timeout(60_000);

  let direct: TestServer;
  let proxied: TestServer;

  before(async () => {
    [direct, proxied] = await Promise.all([startServer(), startServer({ env: { TRUST_PROXY: 'true' } })]);
  });

  after(async () => {
    await Promise.all([direct?.stop(), proxied?.stop()]);
  });

  it('answers every request with an X-Request-Id, carried by each log line written for it, the engine\'s included', async () => {
    const response = await tokenRequest(direct.issuer, { grant_type: 'client_credentials', client_id: 'no-such-client', client_secret: 'x' });
    expect(response.status).to.equal(401);
    const id = response.headers.get('x-request-id')!;
    expect(id).to.match(UUID);
    const lines = await linesWithId(direct, id, 2);
    expect(lines.map((line) => line.message)).to.include.members(['request refused', 'request']);
    expect(lines.find((line) => line.message === 'request')).to.include({ path: '/oauth/token', status: 401 });

    const other = await fetch(`${direct.issuer}/.well-known/openid-configuration`);
    expect(other.headers.get('x-request-id')).to.match(UUID).and.not.equal(id);
  });

  it('puts the id in error answers: the error mapping\'s JSON, the engine\'s, and the error page ("Reference")', async () => {
    const tooLarge = await tokenRequest(direct.issuer, { grant_type: 'client_credentials', padding: 'a'.repeat(60 * 1024) });
    expect(tooLarge.status).to.equal(413);
    expect(await tooLarge.json()).to.deep.include({ error: 'invalid_request', request_id: tooLarge.headers.get('x-request-id') });

    // The engine's own JSON refusals too: an unknown grant type, a client that is not there.
    for (const form of [{ grant_type: 'bogus' }, { grant_type: 'client_credentials', client_id: 'no-such-client', client_secret: 'x' }] as Array<Record<string, string>>) {
      const refused = await tokenRequest(direct.issuer, form);
      expect(refused.status).to.be.within(400, 401);
      expect(await refused.json(), form.grant_type).to.have.property('request_id', refused.headers.get('x-request-id'));
    }

    const page = await fetch(codeRequest(direct.issuer, 'no-such-client').url, { headers: { accept: 'text/html' } });
    expect(page.status).to.equal(400);
    expect(await page.text()).to.contain(`Reference: <code>${page.headers.get('x-request-id')}</code>`);
  });

  it('keeps a line short when the engine repeats a huge parameter in its reason (a 50 KB scope)', async () => {
    const user = await seedUser(direct, [{ workspace: 'Long Lines' }]);
    const { client } = await clientCredentialsToken(direct, user.workspaces[0]!.id);
    const scope = 'x'.repeat(50_000);
    const response = await tokenRequest(direct.issuer, { grant_type: 'client_credentials', scope, client_id: client.client_id, client_secret: client.client_secret! });
    expect(response.status).to.equal(400);
    const lines = await linesWithId(direct, response.headers.get('x-request-id')!, 2);
    expect(lines.map((line) => line.message)).to.include('request refused');
    for (const line of lines) expect(JSON.stringify(line).length, String(line.message)).to.be.below(2_000);
  });

  it('logs why a body was refused without quoting it: a registration that is not JSON, whatever it holds', async () => {
    const body = `XQSECRETXQ${'z'.repeat(40)}`;
    for (const sent of [body, `{"client_secret":${body}}`]) {
      const response = await fetch(`${direct.issuer}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: sent });
      expect(response.status).to.equal(400);
      const lines = await linesWithId(direct, response.headers.get('x-request-id')!, 2);
      const refused = lines.find((line) => line.message === 'request refused');
      expect(refused, JSON.stringify(lines)).to.include({ error: 'invalid_request' });
      for (const line of lines) expect(JSON.stringify(line), String(line.message)).to.not.match(/XQ|SECR/);
    }
  });

  it('logs a client_id URL that carries a user name and password without them, one no URL parser reads too', async () => {
    for (const [clientId, logged] of [
      ['https://alice:PASSW0RDXQ@client.example/oauth.json', 'https://client.example/oauth.json'],
      ['https://alice:PASSW0RDXQ@client example/oauth.json', 'https://client example/oauth.json'],
    ]) {
      const { url } = codeRequest(direct.issuer, clientId!);
      const response = await fetch(url, { redirect: 'manual' });
      const lines = await linesWithId(direct, response.headers.get('x-request-id')!, 2);
      const refused = lines.find((line) => line.message === 'request refused');
      expect(refused, JSON.stringify(lines)).to.include({ client_id: logged });
      for (const line of lines) expect(JSON.stringify(line), String(line.message)).to.not.match(/PASSW0RDXQ|alice/);
    }
  });

  it('logs a client_id of no shape this server\'s have by its length alone: a client secret swapped with the id is never written', async () => {
    const client = await registerClient(direct.issuer, { client_name: 'Swapped Fields' });
    const swapped = { client_id: client.client_secret!, client_secret: client.client_id };
    const form = (extra: Record<string, string>) => ({ method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ ...extra, ...swapped }) });
    const answers = [
      await tokenRequest(direct.issuer, { grant_type: 'refresh_token', refresh_token: 'x', ...swapped }),
      await fetch(`${direct.issuer}/oauth/revoke`, form({ token: 'x' })),
      await fetch(`${direct.issuer}/oauth/introspect`, form({ token: 'x' })),
      await fetch(codeRequest(direct.issuer, client.client_secret!).url, { redirect: 'manual' }),
    ];
    for (const answer of answers) {
      const lines = await linesWithId(direct, answer.headers.get('x-request-id')!, 2);
      const refused = lines.find((line) => line.message === 'request refused');
      expect(refused, `${answer.url}: ${JSON.stringify(lines)}`).to.include({ client_id: `(not a client id, ${client.client_secret!.length} characters)` });
      for (const line of lines) expect(JSON.stringify(line), String(line.message)).to.not.contain(client.client_secret!.slice(0, 16));
    }
    // A client id of this server's shape that names no client is still logged as given.
    const unknown = `cl_${'A'.repeat(32)}`;
    const answer = await fetch(codeRequest(direct.issuer, unknown).url, { redirect: 'manual' });
    expect((await linesWithId(direct, answer.headers.get('x-request-id')!, 2)).find((line) => line.message === 'request refused')).to.include({ client_id: unknown });
  });

  it('logs a path that carries a credential (a token, an API key, a client secret put in the URL) with that segment as its length', async () => {
    const user = await seedUser(direct);
    const workspace = user.workspaces[0]!.id;
    const { client, access_token: token } = await clientCredentialsToken(direct, workspace);
    const { key } = await createApiKey(direct, workspace);
    const recordId = '0b9e2c7a-41f5-4c1e-9a43-6f7d2b8e1c55';
    for (const [path, logged] of [
      [`/rest/${token}`, `/rest/(${token.length} characters)`],
      [`/rest/companies/${key}`, `/rest/companies/(${key.length} characters)`],
      [`/oauth/reg/${client.client_secret!}/x`, `/oauth/reg/(${client.client_secret!.length} characters)/x`],
      // This service's own ids are kept, so a log still says which record or client a request was for.
      [`/rest/companies/${recordId}`, `/rest/companies/${recordId}`],
      [`/oauth/reg/${client.client_id}`, `/oauth/reg/${client.client_id}`],
    ] as const) {
      const answer = await fetch(`${direct.origin}${path}`, { headers: { authorization: `Bearer ${token}` } });
      expect(answer.status, path).to.be.within(400, 499);
      const lines = await linesWithId(direct, answer.headers.get('x-request-id')!);
      expect(lines.find((line) => line.message === 'request'), `${path}: ${JSON.stringify(lines)}`).to.include({ path: logged });
    }
    const log = direct.logs();
    for (const secret of [token, key, client.client_secret!]) expect(log).to.not.contain(secret.slice(-24));
  });

  it('ignores an incoming X-Request-Id without TRUST_PROXY: anyone could plant ids in the log', async () => {
    const response = await fetch(`${direct.issuer}/.well-known/openid-configuration`, { headers: { 'x-request-id': 'planted-by-client-1' } });
    const id = response.headers.get('x-request-id')!;
    expect(id).to.match(UUID);
    expect(await linesWithId(direct, id)).to.have.length(1);
    expect(direct.logs()).to.not.contain('planted-by-client-1');
  });

  it('with TRUST_PROXY, keeps the proxy\'s X-Request-Id when it is safe, so one id follows the request through both', async () => {
    const client = await registerClient(proxied.issuer, { client_name: 'Proxied App' });
    const response = await tokenRequest(proxied.issuer, { grant_type: 'client_credentials', client_id: client.client_id, client_secret: 'wrong' }, { 'x-request-id': 'edge-7f3a.b_9' });
    expect(response.status).to.equal(401);
    expect(response.headers.get('x-request-id')).to.equal('edge-7f3a.b_9');
    const lines = await linesWithId(proxied, 'edge-7f3a.b_9', 2);
    expect(lines.map((line) => line.message)).to.include.members(['request refused', 'request']);
  });

  it('with TRUST_PROXY, replaces an unsafe X-Request-Id (10 KB, quotes, spaces, other characters) with its own; a newline never gets in', async () => {
    const unsafe = ['a'.repeat(10 * 1024), 'x","level":"error', 'two words', 'id;drop', 'café'];
    for (const value of unsafe) {
      const response = await fetch(`${proxied.issuer}/.well-known/openid-configuration`, { headers: { 'x-request-id': value } });
      expect(response.status).to.equal(200);
      expect(response.headers.get('x-request-id')).to.match(UUID);
      expect(await linesWithId(proxied, response.headers.get('x-request-id')!)).to.have.length(1);
    }
    // Node's HTTP parser refuses a header with a bare newline before any of the service's code runs.
    const head = (value: string) => `GET /.well-known/openid-configuration HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${value}\r\nConnection: close\r\n\r\n`;
    expect(await rawRequest(Number(new URL(proxied.origin).port), head('abc\n{"level":"error","message":"injected"}'))).to.equal(400);
    expect(await rawRequest(Number(new URL(proxied.origin).port), head('abc\r\n injected'))).to.equal(400);
    await sleep(100);
    for (const line of proxied.logs().split('\n').filter(Boolean)) expect(line).to.not.contain('injected');
    expect(proxied.logs()).to.not.contain('aaaaaaaaaaaaaaaa').and.not.contain('"level":"error"');
  });
});

describe('logs on a full disk (stderr answering ENOSPC)', function () {
  this.timeout(30_000);

  it('keeps serving without its log, and stops on SIGTERM, when stderr cannot be written', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'log-full-'));
    const [port, metricsPort] = await freePorts(2);
    const full = await open('/dev/full', 'w');
    const child = spawn(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: dir, STORE: `sqlite:${join(dir, 'data', 'oauth.sqlite')}`, PORT: String(port), METRICS_PORT: String(metricsPort), HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', full.fd],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const healthy = await eventually('the service answers', async () => (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) }).catch(() => undefined))?.status === 200 || undefined);
      expect(healthy).to.equal(true);
      // Every request logs a line: more than the first.
      for (let request = 0; request < 20; request++) expect((await fetch(`http://127.0.0.1:${port}/.well-known/openid-configuration`)).status).to.equal(200);
      child.kill('SIGTERM');
      expect(await Promise.race([exited, sleep(15_000).then(() => 'still running 15 s after SIGTERM')])).to.equal(0);
    } finally {
      child.kill('SIGKILL');
      await full.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('logs at start: settings that look like the service\'s own but are not', function () {
  this.timeout(60_000);
  let server: TestServer;

  before(async () => {
    server = await startServer({ env: { LOG_LEVL: 'debug', PROT: '8080', RATE_LIMIT_TOKENS: 'not-a-secret-but-never-logged' } });
  });

  after(async () => {
    await server?.stop();
  });

  it('names each, with the setting likely meant, and never its value', () => {
    const warnings = server.logs().split('\n').filter((line) => line.includes('is not a setting of this service')).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(warnings.map(({ variable, meant }) => `${String(variable)} -> ${String(meant)}`)).to.deep.equal(['LOG_LEVL -> LOG_LEVEL', 'PROT -> PORT', 'RATE_LIMIT_TOKENS -> RATE_LIMITS']);
    expect(warnings[0]).to.include({ level: 'warn', message: 'LOG_LEVL is not a setting of this service and is ignored; did you mean LOG_LEVEL?' });
    expect(server.logs()).not.to.include('not-a-secret-but-never-logged');
  });
});

describe('logs at start: settings another makes moot', function () {
  this.timeout(60_000);
  let server: TestServer;

  before(async () => {
    server = await startServer({ env: { FAPI: 'on', PAR_REQUIRED: 'off', PKCE_REQUIRED: 'public', CIMD: 'off', CIMD_ALLOWED_DOMAINS: 'moot-domain.example' } });
  });

  after(async () => {
    await server?.stop();
  });

  it('names each, with the setting that decides instead, and never its value', () => {
    const warnings = server.logs().split('\n').filter((line) => line.includes('has no effect')).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(warnings.map(({ message }) => message)).to.deep.equal([
      'PAR_REQUIRED has no effect: FAPI=on pushes every authorization request (FAPI 2.0)',
      'PKCE_REQUIRED has no effect: FAPI=on requires PKCE of every client (FAPI 2.0)',
      'CIMD_ALLOWED_DOMAINS has no effect: CIMD=off fetches no metadata document',
    ]);
    expect(warnings[0]).to.include({ level: 'warn', variable: 'PAR_REQUIRED' });
    expect(server.logs()).not.to.include('moot-domain.example');
  });
});

describe('logs on a terminal: readable lines', function () {
  this.timeout(30_000);

  let child: ChildProcess | undefined;

  after(async () => {
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child!.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  });

  it('writes `time LEVEL message key=value` lines instead of JSON when stderr is a terminal', async () => {
    const [port, metricsPort] = await freePorts(2);
    const origin = `http://127.0.0.1:${port}`;
    // script(1) runs the server on a pseudo-terminal and copies what it writes to this pipe.
    child = spawn('script', ['-qfec', `${process.execPath} src/main.ts`, '/dev/null'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: String(port), HOST: '127.0.0.1', BASE_URL: origin, STORE: 'memory:', METRICS_PORT: String(metricsPort) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    for (const deadline = Date.now() + 20_000; !(await fetch(`${origin}/readyz`).then((r) => r.ok, () => false)); await sleep(100)) {
      if (Date.now() > deadline) throw new Error(`the server did not start:\n${output}`);
    }
    const response = await fetch(`${origin}/.well-known/openid-configuration`);
    const id = response.headers.get('x-request-id')!;
    for (const deadline = Date.now() + 3000; !output.includes(id) && Date.now() < deadline;) await sleep(50);

    const lines = output.split(/\r?\n/);
    expect(lines.find((line) => line.includes('INFO  listening '))).to.match(/^\d\d:\d\d:\d\d\.\d{3} INFO  listening issuer=http:\/\/127\.0\.0\.1:\d+ port=\d+ store=memory pid=\d+$/);
    expect(lines.find((line) => line.includes(id))).to.match(
      new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} INFO  request request_id=${id} method=GET path=/\\.well-known/openid-configuration status=200 ms=\\d+ ip=127\\.0\\.0\\.1$`),
    );
    expect(output).to.not.contain('{"level"');
  });
});
