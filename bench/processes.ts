import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The child processes and temporary directories a bench run owns, so that everything started is
 * stopped and removed on every way out: the normal end, an error, SIGINT, the time limit.
 */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Only the tail of a child's output is kept: enough to explain a crash, bounded under load. */
const OUTPUT_LIMIT = 64 * 1024;

export interface ServerProcess {
  readonly name: string;
  readonly pid: number;
  /** The last part of what the process wrote to stdout and stderr. */
  output(): string;
  exited(): boolean;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();
/** What else a run started that must be stopped at the end (a redis-server). */
const stoppers = new Set<() => Promise<void>>();

export function onCleanUp(stop: () => Promise<void>): void {
  stoppers.add(stop);
}
/** Where servers write V8 CPU profiles (`--profile`), one folder a server; undefined: no profiling. */
let profileDir: string | undefined;

export function profileServersInto(dir: string): void {
  profileDir = dir;
}
const directories = new Set<string>();

export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  directories.add(dir);
  return dir;
}

/** Where servers run under callgrind write their instruction counts (`--instructions`); undefined: run natively. */
let instructionsDir: string | undefined;

export function countInstructionsInto(dir: string): void {
  instructionsDir = dir;
}

/**
 * Who a server under callgrind says it is: valgrind names the pipe it listens on after the user and
 * host in its environment (LOGNAME or USER, HOST or HOSTNAME), so each control call must say the
 * same as the server it asks. The servers' environments are the bench's own making, and the
 * service reads HOST as the address it listens on, so it is kept.
 */
function callgrindIdentity(env: Record<string, string | undefined>): Record<string, string> {
  return { LOGNAME: 'bench', USER: 'bench', HOST: env.HOST ?? 'bench', HOSTNAME: 'bench' };
}
/** Each server's identity, by process id, for the control calls. */
const identities = new Map<number, Record<string, string>>();

/** Starts `node <args>` from the repository root (or `cwd`, a copy of another commit) and waits until `readyUrl` answers 200. */
export async function startNode(name: string, args: readonly string[], env: Record<string, string>, readyUrl: string, cwd = ROOT): Promise<ServerProcess> {
  const profiling = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, name)}`] : [];
  const child = instructionsDir
    ? spawn('valgrind', [
      '--tool=callgrind', '--separate-threads=yes', `--callgrind-out-file=${join(instructionsDir, `${name}.%p`)}`, process.execPath, ...args,
    ], { cwd, env: { ...env, ...callgrindIdentity(env) }, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, [...profiling, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  if (instructionsDir) identities.set(child.pid!, callgrindIdentity(env));
  children.add(child);
  child.once('exit', () => children.delete(child));
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-OUTPUT_LIMIT);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);

  const server: ServerProcess = {
    name,
    pid: child.pid!,
    output: () => output,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    stop: () => stopChild(child),
  };
  await waitUntilReady(server, readyUrl);
  return server;
}

/** Instructions a server executed since its previous dump: its main (JavaScript) thread's, and all its threads'. */
export interface InstructionCount {
  mainThread: number;
  allThreads: number;
}

/** Asks callgrind for a dump of `server` (started while counting instructions) and reads it. */
export async function dumpInstructions(server: ServerProcess): Promise<InstructionCount> {
  if (!instructionsDir) throw new Error('not counting instructions');
  const dir = instructionsDir;
  const dumps = () => readdirSync(dir).filter((file) => file.startsWith(`${server.name}.${server.pid}.`));
  const before = new Set(dumps());
  execFileSync('callgrind_control', ['--dump', String(server.pid)], { env: { ...process.env, ...identities.get(server.pid) }, stdio: 'ignore' });
  // callgrind writes the dump (one file a thread, `<name>.<pid>.<dump>-<thread>`) when the server next runs.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const written = dumps().filter((file) => !before.has(file));
    if (written.length > 0) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const counts = dumps().filter((file) => !before.has(file)).map((file) => ({ file, count: totalOf(join(dir, file)) }));
      return {
        mainThread: counts.find(({ file }) => file.endsWith('-01'))?.count ?? 0,
        allThreads: counts.reduce((sum, { count }) => sum + count, 0),
      };
    }
    if (Date.now() > deadline) throw new Error(`callgrind wrote no dump for ${server.name} within 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function totalOf(file: string): number {
  const total = /^(?:summary|totals): (\d+)/m.exec(readFileSync(file, 'utf8'));
  return total ? Number(total[1]) : 0;
}

async function waitUntilReady(server: ServerProcess, url: string): Promise<void> {
  // Under callgrind a server starts about fifty times slower.
  const deadline = Date.now() + (instructionsDir ? 900_000 : 30_000);
  while (Date.now() < deadline) {
    if (server.exited()) throw new Error(`${server.name} exited during start-up:\n${server.output()}`);
    try {
      const response = await fetch(url);
      await response.body?.cancel();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${server.name} did not answer ${url} in time:\n${server.output()}`);
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5000).unref();
  });
}

/** Stops every child this run started and removes its temporary directories. */
export async function cleanUp(): Promise<void> {
  await Promise.all([...children].map(stopChild));
  await Promise.all([...stoppers].map(async (stop) => {
    await stop();
    stoppers.delete(stop);
  }));
  await Promise.all([...directories].map(async (dir) => {
    await rm(dir, { recursive: true, force: true });
    directories.delete(dir);
  }));
}

/** The last resort when the harness exits without cleaning up (an uncaught error): synchronous only. */
export function cleanUpNow(): void {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
}
