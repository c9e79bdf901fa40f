import { execFileSync } from 'node:child_process';

import { expect } from 'chai';

import { codeRequest, exchangeCode, registerClient, tokenRequest, postCredentials } from '../support/oauth.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

/** The process ids of the workers a supervising process runs. */
function workersOf(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

describe('WORKERS=2: two processes serving one port over the embedded store', function () {
  this.timeout(60_000);

  let server: TestServer;

  before(async () => {
    server = await startServer({ env: { WORKERS: '2' } });
  });

  after(async () => {
    await server?.stop();
  });

  it('runs two workers, whose requests together make whole flows (connections go to either)', async () => {
    expect(await eventually('two workers', () => (workersOf(server.pid()!).length === 2 ? true : undefined), 10_000, 100)).to.equal(true);
    const user = await seedUser(server);
    const client = await registerClient(server.issuer, { client_name: 'Workers App' });
    for (let i = 0; i < 4; i += 1) {
      const { url, verifier } = codeRequest(server.issuer, client.client_id);
      const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
      const exchanged = await exchangeCode(server.issuer, client, callback.searchParams.get('code')!, verifier);
      expect(exchanged.status).to.equal(200);
      const { refresh_token: refreshToken } = await exchanged.json() as { refresh_token: string };
      const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });
      expect(refreshed.status).to.equal(200);
    }
    // Each worker logs that it listens.
    expect(server.logs().match(/"message":"listening"/g)).to.have.length(2);
  });

  it('replaces a worker that dies, and keeps answering meanwhile', async () => {
    const [victim, survivor] = workersOf(server.pid()!);
    process.kill(victim!, 'SIGKILL');
    const replaced = await eventually('a replacement worker', () => {
      const now = workersOf(server.pid()!);
      return now.length === 2 && !now.includes(victim!) && now.includes(survivor!) ? now : undefined;
    }, 10_000, 100);
    expect(replaced).to.have.length(2);
    for (let i = 0; i < 6; i += 1) expect((await fetch(`${server.origin}/healthz`)).status).to.equal(200);
    expect(server.logs()).to.contain('a worker stopped; starting another');
  });

  it('stops every worker on SIGTERM', async () => {
    const workers = workersOf(server.pid()!);
    await server.stop();
    for (const pid of workers) expect(() => process.kill(pid, 0), `worker ${pid} still running`).to.throw();
  });
});
