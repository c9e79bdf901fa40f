import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
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

/** Starts `node <args>` from the repository root and waits until `readyUrl` answers 200. */
export async function startNode(name: string, args: readonly string[], env: Record<string, string>, readyUrl: string): Promise<ServerProcess> {
  const profiling = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, name)}`] : [];
  const child = spawn(process.execPath, [...profiling, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
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

async function waitUntilReady(server: ServerProcess, url: string): Promise<void> {
  const deadline = Date.now() + 30_000;
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
  throw new Error(`${server.name} did not answer ${url} within 30 s:\n${server.output()}`);
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
