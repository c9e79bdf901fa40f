import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { postCredentials, registerClient } from '../support/oauth.ts';
import { freePorts, initialAccessToken, seedUser, startServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/wait.ts';

/** The processes whose environment names PORT=`port`: a service `npm start` left behind, if any (Linux's /proc). */
async function servicesOn(port: number): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const environ = await readFile(`/proc/${entry}/environ`, 'latin1').catch(() => '');
    if (environ.split('\0').includes(`PORT=${port}`)) found.push(Number(entry));
  }
  return found;
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('shutdown', function () {
  this.timeout(30_000);

  let server: TestServer;

  after(async () => {
    await server?.stop();
  });

  it('lets a request in flight finish on SIGTERM, ending its connection, then exits', async () => {
    server = await startServer();
    const user = await seedUser(server);
    const client = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
    const body = new URLSearchParams({ grant_type: 'client_credentials', ...postCredentials(client) }).toString();

    // Half the body now, the rest after SIGTERM: the request is in flight when the signal comes.
    const answer = new Promise<{ status: number; text: string; connection: string | undefined }>((resolve, reject) => {
      const req = request(`${server.origin}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) },
      }, (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => { text += chunk.toString(); });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, connection: res.headers.connection }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.write(body.slice(0, 10));
      void sleep(300).then(() => {
        process.kill(server.pid()!, 'SIGTERM');
        return sleep(300);
      }).then(() => req.end(body.slice(10)));
    });

    const { status, text, connection } = await answer;
    expect(status, text).to.equal(200);
    expect(JSON.parse(text)).to.have.property('access_token');
    expect(connection, 'no further request is sent on a connection of a stopping server').to.equal('close');
    const exited = Date.now() + 5000;
    while (Date.now() < exited && (await fetch(`${server.origin}/healthz`).then(() => true, () => false))) await sleep(100);
    expect(await fetch(`${server.origin}/healthz`).then(() => 'answering', () => 'stopped')).to.equal('stopped');
  });

  it('stops on SIGHUP (a closed terminal) as on SIGTERM: the request in flight gets its answer, not a connection cut on the spot', async () => {
    server = await startServer();
    const answer = new Promise<number | string>((resolve) => {
      const req = request(`${server.origin}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '29' } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', (error) => resolve(error.message));
      req.write('grant_type=');
      void sleep(300).then(() => {
        process.kill(server.pid()!, 'SIGHUP');
        return sleep(300);
      }).then(() => req.end('client_credentials'));
    });
    // No client authentication: the engine's 401 invalid_client, answered in full.
    expect(await answer).to.equal(401);
    expect(server.logs()).to.match(/"signal":"SIGHUP","message":"stopping"/);
    await eventually('the service stopped', () => fetch(`${server.origin}/healthz`).then(() => undefined, () => true), 5_000, 100);
  });

  it('stops cleanly when `npm start`, as the README runs it, is sent SIGTERM (as a supervisor or `docker stop` sends it), leaving no service behind', async () => {
    const [port] = await freePorts(1);
    const home = await mkdtemp(join(tmpdir(), 'oauth-npm-start-'));
    let output = '';
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: home, HOST: '127.0.0.1', PORT: String(port), STORE: 'memory:', METRICS: 'off', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    npm.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    npm.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    const health = () => fetch(`http://127.0.0.1:${port}/healthz`).then((response) => response.status, () => undefined);
    try {
      await eventually('npm start answering', health, 20_000, 100);
      npm.kill('SIGTERM');
      await eventually('the service stopped', async () => (await health()) === undefined, 5_000, 100);
      expect(output).to.match(/"message":"stopping"/);
    } finally {
      // A service left behind would keep the port: end it whatever the test found.
      for (const pid of await servicesOn(port)) process.kill(pid, 'SIGKILL');
      await rm(home, { recursive: true, force: true });
    }
  });

  it('cuts a request still unfinished 10 s after SIGTERM, logged as 499 (no answer reached the client), not as the 400 of a body that never ended', async () => {
    server = await startServer();
    // A body that never ends.
    const cut = new Promise<string>((resolve) => {
      const req = request(`${server.origin}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': 100 } }, () => resolve('answered'));
      req.on('error', (error) => resolve(error.message));
      req.write('grant_type=client_cre');
    });
    await sleep(300);
    process.kill(server.pid()!, 'SIGTERM');
    expect(await cut).to.equal('socket hang up');
    const line = await eventually('the request line', () => server.logs().split('\n').find((text) => text.includes('"message":"request"') && text.includes('"/oauth/token"')), 5_000, 50);
    expect(JSON.parse(line)).to.include({ method: 'POST', path: '/oauth/token', status: 499 }).and.have.property('ms').above(9_000);
  });
});
