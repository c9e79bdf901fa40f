import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { openStore } from '../../adapters/index.ts';
import type { Role } from '../../adapters/store.ts';
import { Accounts } from '../../src/accounts/accounts.ts';
import { registerClient, type RegisteredClient } from './oauth.ts';
import { compileCacheEnv } from './compile_cache.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface TestServer {
  /** The issuer, e.g. http://127.0.0.1:41234 (plus BASE_PATH when given). */
  issuer: string;
  /** Where the server listens, http://127.0.0.1:port: the issuer's origin, unless `issuerHost` named another host. */
  origin: string;
  /**
   * The metrics listener's `/metrics` (METRICS=local, the default): a port of its own on
   * loopback, free when the server started (METRICS_PORT), as several servers run at once.
   */
  metrics: string;
  /** Storage URL of the real SQLite file the server uses (in a `data` directory the server creates). */
  store: string;
  /**
   * The server's home directory (HOME), a temporary one: the embedded store's key-encryption key
   * is made under it (`.config/workspace-oauth-server/`), never in the real one. Servers that
   * share a store share it, as instances on one machine would.
   */
  home: string;
  /** Everything the server process wrote to stderr (its JSON log). */
  logs(): string;
  /** Stops the process (SIGTERM) and starts a new one on the same port and file. */
  restart(): Promise<void>;
  /** Kills the process at once (SIGKILL: no shutdown, nothing flushed), resolving once it is gone; restart() starts it again. */
  crash(): Promise<void>;
  stop(): Promise<void>;
  /** The server process's id (with WORKERS above 1, the supervising process). */
  pid(): number | undefined;
  /** Runs the admin CLI against the same store. */
  /** Runs the admin CLI against the server's store; `stdin` is what it reads (bytes as they are, for input in another encoding). */
  admin(args: string[], stdin?: string | Buffer): Promise<{ code: number; stdout: string; stderr: string }>;
  env: Record<string, string>;
}

export interface ServerOptions {
  /** Extra environment, e.g. REGISTRATION=initial_access_token. */
  env?: Record<string, string>;
  /** A path for the issuer, e.g. '/auth'. */
  basePath?: string;
  /** Share another server's storage URL (several instances, one store). */
  store?: string;
  /**
   * What start waits for: `ready` (default), `/readyz` answering 200; `listening`, `/healthz`
   * answering, for a service that waits for its store.
   */
  until?: 'ready' | 'listening';
  /**
   * The issuer's host name instead of 127.0.0.1, e.g. `localhost`: the server still listens on
   * 127.0.0.1, so a browser can reach it under a name that is not BASE_URL's.
   */
  issuerHost?: string;
}

/** The home directory of the first server on each storage URL, for those started on it after. */
const homes = new Map<string, string>();

export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}

/**
 * `count` different free ports: every probe holds its port until all are picked, so two picked
 * together (a server's PORT and METRICS_PORT) are never the same one.
 */
export async function freePorts(count: number): Promise<number[]> {
  const probes = await Promise.all(Array.from({ length: count }, () => new Promise<Server>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => resolve(probe));
  })));
  const ports = probes.map((probe) => (probe.address() as AddressInfo).port);
  await Promise.all(probes.map((probe) => new Promise((resolve) => probe.close(resolve))));
  return ports;
}

/**
 * How many times a server is started on other ports when one it was given is taken meanwhile:
 * freePort's probe lets the port go, and another process (tests run in parallel) may bind it first.
 */
const PORT_ATTEMPTS = 5;

/** The server could not have a port it was given; ports picked again, it may start. */
class PortTaken extends Error {}

/** Starts `node src/main.ts` as a real process on loopback, with its own SQLite file. */
export async function startServer(options: ServerOptions = {}): Promise<TestServer> {
  const dir = await mkdtemp(join(tmpdir(), 'oauth-test-'));
  const store = options.store ?? `sqlite:${join(dir, 'data', 'oauth.sqlite')}`;
  const home = homes.get(store) ?? join(dir, 'home');
  if (!homes.has(store)) homes.set(store, home);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    ...compileCacheEnv(),
    HOME: home,
    HOST: '127.0.0.1',
    STORE: store,
    LOG_LEVEL: 'info',
  };
  let port = 0;
  let metricsPort = 0;
  let output = '';
  let child: ChildProcess | undefined;

  const start = async () => {
    const since = output.length;
    child = spawn(process.execPath, ['src/main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.stderr!.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    await waitUntilAnswering(`http://127.0.0.1:${port}${options.until === 'listening' ? '/healthz' : '/readyz'}`, child, () => output.slice(since), env.LOG_LEVEL === 'info' || env.LOG_LEVEL === 'debug');
  };
  const stopChild = async () => {
    const running = child;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      running.once('exit', () => resolve());
      running.kill('SIGTERM');
      setTimeout(() => running.kill('SIGKILL'), 5000).unref();
    });
  };

  for (let attempt = 1; ; attempt++) {
    [port, metricsPort] = await freePorts(2) as [number, number];
    Object.assign(env, {
      PORT: String(port),
      BASE_URL: `http://${options.issuerHost ?? '127.0.0.1'}:${port}${options.basePath ?? ''}`,
      METRICS_PORT: String(metricsPort),
      ...options.env,
    });
    try {
      await start();
      break;
    } catch (error) {
      if (!(error instanceof PortTaken) || attempt === PORT_ATTEMPTS) {
        await rm(dir, { recursive: true, force: true });
        throw error;
      }
      output = '';
    }
  }
  const origin = `http://127.0.0.1:${port}`;
  const issuer = env.BASE_URL!;
  return {
    issuer,
    origin,
    metrics: `http://127.0.0.1:${metricsPort}/metrics`,
    store,
    home,
    env,
    logs: () => output,
    pid: () => child?.pid,
    restart: async () => {
      await stopChild();
      await start();
    },
    crash: async () => {
      const running = child;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
      running.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      await stopChild();
      if (homes.get(store) === home && !options.store) homes.delete(store);
      await rm(dir, { recursive: true, force: true });
    },
    admin: (args, stdin) => runAdmin(env, args, stdin),
  };
}

/**
 * Until `probe` answers 200: `/readyz` once the store answers and the keys are loaded, `/healthz`
 * once the process listens. With `logsListening`, only once the child has also said it listens,
 * so that another process holding the port cannot answer for it.
 */
async function waitUntilAnswering(probe: string, child: ChildProcess, output: () => string, logsListening: boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      const said = output();
      if (said.includes('(EADDRINUSE)')) throw new PortTaken(said);
      throw new Error(`server exited with ${child.exitCode}:\n${said}`);
    }
    try {
      const response = await fetch(probe);
      if (response.ok && (!logsListening || output().includes('"message":"listening"'))) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`server did not become ready:\n${output()}`);
}

export interface RunOptions {
  /** The script, relative to the repository: `src/main.ts` unless told, or an entry point of `bin/`. */
  entry?: string;
  args?: string[];
  /** The Node.js to run it with: this one unless told. */
  node?: string;
}

/**
 * Runs the service (`node src/main.ts`, or `options.entry`) on loopback with the memory store and
 * `env` until it exits by itself, as a start it refuses does: its exit code and output. Killed
 * after 20 s if it keeps running.
 */
export function runUntilExit(env: Record<string, string>, options: RunOptions = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(options.node ?? process.execPath, [options.entry ?? 'src/main.ts', ...options.args ?? []], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...compileCacheEnv(), STORE: 'memory:', HOST: '127.0.0.1', ...env },
      timeout: 20_000,
      killSignal: 'SIGKILL',
    }, (_error, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }));
  });
}

/** Starts the service (runUntilExit) with the env `withPort` gives for a port another listener holds. */
export async function startOnHeldPort(withPort: (port: number) => Record<string, string>, options: RunOptions = {}): Promise<{ port: number; code: number | null; stderr: string }> {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const { port } = holder.address() as { port: number };
  try {
    const { code, stderr } = await runUntilExit(withPort(port), options);
    return { port, code, stderr };
  } finally {
    holder.close();
  }
}

/** Runs the admin CLI of this checkout, or of the copy of another commit at `root`. */
export function runAdmin(env: Record<string, string>, args: string[], stdin?: string | Buffer, root = ROOT): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['src/cli/admin.ts', ...args], { cwd: root, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    child.on('exit', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.end(stdin ?? '');
  });
}

export interface SeededUser {
  id: string;
  email: string;
  password: string;
  name: string;
  workspaces: Array<{ id: string; name: string; role: Role }>;
}

let seq = 0;

/**
 * Creates workspaces and a user who belongs to them, written straight into the server's SQLite
 * file (the server reads it live). Roles default to admin for the first workspace; the email is a
 * new one unless `options.email` names it.
 */
export async function seedUser(
  server: TestServer, memberships: Array<{ workspace: string; role?: Role }> = [{ workspace: 'Acme' }], options: { email?: string } = {},
): Promise<SeededUser> {
  const store = openStore(server.store);
  try {
    const accounts = new Accounts(store.accounts);
    seq += 1;
    const email = options.email ?? `user${seq}-${Date.now()}@example.com`;
    const password = `pw-${seq}-correct-horse`;
    const user = await accounts.createUser({ email, name: `Test User ${seq}`, givenName: 'Test', familyName: `User ${seq}`, password });
    const workspaces = [];
    for (const { workspace, role = 'admin' } of memberships) {
      const ws = await accounts.createWorkspace(workspace);
      await accounts.addMember(user.id, ws.id, role);
      workspaces.push({ id: ws.id, name: ws.name, role });
    }
    return { id: user.id, email, password, name: user.name, workspaces };
  } finally {
    await store.close();
  }
}

/** An initial access token for a workspace, made with the admin CLI: single-use unless `uses` says otherwise; `fapi` registers FAPI 2.0 clients. */
export async function initialAccessToken(server: TestServer, workspaceId: string, options: { uses?: number; expiresIn?: string; fapi?: boolean } = {}): Promise<string> {
  const result = await server.admin([
    'iat', 'create', '--workspace', workspaceId, '--json',
    ...(options.uses === undefined ? [] : ['--uses', String(options.uses)]),
    ...(options.expiresIn === undefined ? [] : ['--expires-in', options.expiresIn]),
    ...(options.fapi ? ['--fapi'] : []),
  ]);
  if (result.code !== 0) throw new Error(`iat create failed: ${result.stderr}`);
  return (JSON.parse(result.stdout) as { initial_access_token: string }).initial_access_token;
}

/**
 * A client an operator vetted: registered with an initial access token for a new workspace, as a
 * workspace admin would hand out. Error answers reach its redirect URI directly.
 */
export async function registerVettedClient(server: TestServer, metadata: Record<string, unknown> = {}): Promise<RegisteredClient> {
  const store = openStore(server.store);
  let workspaceId: string;
  try {
    seq += 1;
    workspaceId = (await new Accounts(store.accounts).createWorkspace(`Vetted ${seq}`)).id;
  } finally {
    await store.close();
  }
  return registerClient(server.issuer, metadata, await initialAccessToken(server, workspaceId));
}

/** A setting as the server's store holds it (sealed keys, for instance), read from outside the server. */
export async function storedSetting(server: TestServer, name: string): Promise<string | undefined> {
  const store = openStore(server.store);
  try {
    return await store.settings.get(name);
  } finally {
    await store.close();
  }
}
