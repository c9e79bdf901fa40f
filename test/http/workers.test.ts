import { execFileSync } from 'node:child_process';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { codeRequest, exchangeCode, register, registerClient, tokenRequest, postCredentials } from '../support/oauth.ts';
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

  it('replaces workers that keep dying ever more slowly, and both at once, without stopping itself; each line names the process that wrote it', async () => {
    const replacementOf = async (gone: number[]) => eventually('replacement workers', () => {
      const now = workersOf(server.pid()!);
      return now.length === 2 && gone.every((pid) => !now.includes(pid)) ? now : undefined;
    }, 20_000, 50);
    const stops = () => server.logs().split('\n').filter((line) => line.includes('"message":"a worker stopped; starting another"'))
      .map((line) => JSON.parse(line) as { pid: number; worker_pid: number; restart_in_ms: number });
    const delays = () => stops().map((line) => line.restart_in_ms);
    const before = delays().length;
    // Every worker killed soon after it started: each replacement waits twice as long as the one before.
    const both = workersOf(server.pid()!);
    for (const pid of both) process.kill(pid, 'SIGKILL');
    const replaced = await replacementOf(both);
    const next = replaced.find((pid) => !both.includes(pid))!;
    process.kill(next, 'SIGKILL');
    await replacementOf([next]);
    const added = delays().slice(before);
    expect(added).to.have.length(3);
    expect(added[1]).to.equal(added[0]! * 2);
    expect(added[2]).to.equal(added[1]! * 2);
    expect((await fetch(`${server.origin}/healthz`)).status).to.equal(200);
    // The supervisor's lines and each worker's are told apart by their pid.
    expect(stops().slice(before).map((line) => [line.pid, line.worker_pid])).to.have.deep.members([...both, next].map((pid) => [server.pid(), pid]));
    const listening = server.logs().split('\n').filter((line) => line.includes('"message":"listening"')).map((line) => (JSON.parse(line) as { pid: number }).pid);
    expect(new Set(listening).size, 'one pid per worker').to.equal(listening.length);
    expect(listening).to.not.include(server.pid());
  });

  it('stops every worker on SIGTERM', async () => {
    const workers = workersOf(server.pid()!);
    await server.stop();
    for (const pid of workers) expect(() => process.kill(pid, 0), `worker ${pid} still running`).to.throw();
  });
});

describe('WORKERS=2: stopping while a worker is replaced or signals come twice', function () {
  this.timeout(60_000);

  let server: TestServer | undefined;

  afterEach(async function () {
    // What the supervisor and its workers said, to tell a failure here from the machine's load.
    if (this.currentTest?.state === 'failed' && server) console.error(server.logs().split('\n').slice(-60).join('\n'));
    await server?.stop();
    server = undefined;
  });

  /** Whether process `pid` is gone. */
  const gone = (pid: number) => {
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  };

  /** Runs `during` while another process holds the store's write lock, so that writes sent meanwhile wait in the workers. */
  async function withWritesHeld<T>(store: string, during: () => Promise<T>): Promise<T> {
    const other = new DatabaseSync(store.replace(/^sqlite:/, ''));
    try {
      other.exec('BEGIN IMMEDIATE');
      return await during();
    } finally {
      if (other.isTransaction) other.exec('COMMIT');
      other.close();
    }
  }

  /**
   * The two workers, once both listen: the supervisor hands connections only to a worker that
   * listens, so requests sent while one is still starting all go to the other.
   */
  async function twoListeningWorkers(supervisor: number): Promise<number[]> {
    return eventually('two workers, both listening', () => {
      const workers = workersOf(supervisor);
      const listening = server!.logs().split('\n').filter((line) => line.includes('"message":"listening"')).length;
      return workers.length === 2 && listening >= 2 ? workers : undefined;
    }, 10_000, 100);
  }

  it('starts no replacement for a worker that died just before SIGTERM, and exits once the other has finished', async () => {
    server = await startServer({ env: { WORKERS: '2' } });
    const supervisor = server.pid()!;
    const [victim] = await twoListeningWorkers(supervisor);
    const writes = await withWritesHeld(server.store, async () => {
      // Both workers get a write to wait on (connections go to either in turn).
      const waiting = [1, 2, 3, 4].map((n) => register(server!.issuer, { client_name: `Waits ${n}` }).then((response) => response.status, () => 'reset'));
      await sleep(300);
      process.kill(victim!, 'SIGKILL');
      await sleep(200);
      process.kill(supervisor, 'SIGTERM');
      // Longer than a worker's replacement takes to start (1 s and its start-up).
      await sleep(3_000);
      return waiting;
    });
    await eventually('the supervisor gone', () => (gone(supervisor) ? true : undefined), 15_000, 100);
    const logs = server.logs();
    expect(logs.slice(logs.indexOf('"stopping workers"')), 'no worker started after the signal').to.not.contain('"message":"listening"');
    // The survivor's writes were answered, not cut (the victim's were reset with it).
    expect(await Promise.all(writes)).to.include(201);
  });

  it('lets the requests in flight finish when the signal comes twice, from the process group and from the supervisor', async () => {
    server = await startServer({ env: { WORKERS: '2' } });
    const supervisor = server.pid()!;
    const workers = await twoListeningWorkers(supervisor);
    const answers = await withWritesHeld(server.store, async () => {
      const waiting = [1, 2, 3, 4].map((n) => register(server!.issuer, { client_name: `In flight ${n}` }).then((response) => response.status, () => 'reset'));
      await sleep(300);
      // As `kill -TERM -- -PGID` does: every process of the group at once.
      for (const pid of [supervisor, ...workers]) process.kill(pid, 'SIGTERM');
      await sleep(1_000);
      return waiting;
    });
    expect(await Promise.all(answers)).to.deep.equal([201, 201, 201, 201]);
    await eventually('the supervisor gone', () => (gone(supervisor) ? true : undefined), 15_000, 100);
  });
});
