import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { Cluster } from 'ioredis';

import { connectRedis, type RedisClient } from '../../adapters/redis/connection.ts';
import { freePort } from './server.ts';

/**
 * Real Redis processes for tests, on free loopback ports, in temporary directories that are
 * removed when they stop: one server, a primary and its replica, a master watched by sentinels, a
 * three-node cluster (with replicas if asked).
 * Nothing is persisted (`--save ''`, no AOF) unless a test asks for it (`--appendonly yes`).
 */

export interface RedisDeployment {
  /** The STORE URL that reaches it. */
  url: string;
  /** Stops every process and removes the directories. */
  stop(): Promise<void>;
}

export interface RedisServer extends RedisDeployment {
  port: number;
  /** Stops the process (an outage: connections drop, new ones are refused); the port stays reserved for up(). */
  down(): Promise<void>;
  /** Starts it again on the same port and directory (with `extra` options for this start, e.g. `--replicaof`): empty, unless it keeps an AOF there. */
  up(extra?: string[]): Promise<void>;
  /** Kills the process (SIGKILL: nothing flushed, no replica waited for); the port stays reserved for up(). */
  kill(): Promise<void>;
  /** Freezes the process (SIGSTOP): connections stay open, nothing is answered. */
  pause(): void;
  resume(): void;
}

const run = promisify(execFile);

/** Processes still running, killed if the test run exits without stopping them. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 10_000 });
  return stdout.trim();
}

/**
 * One redis-server; `extra` adds options (cluster mode), or makes them for each try when they name
 * ports. A port found free may be taken before redis-server binds it (by another process's
 * outgoing connection, from the same range), so a start that fails so is tried on other ports.
 */
export async function startRedis(extra: string[] | (() => Promise<string[]>) = []): Promise<RedisServer> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startRedisOnce(typeof extra === 'function' ? await extra() : extra);
    } catch (error) {
      if (attempt === 3 || !/Address already in use/.test((error as Error).message)) throw error;
    }
  }
}

async function startRedisOnce(extra: string[]): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), 'redis-'));
  const port = await freePort();
  // A replica that connects is sent the data at once, not after the 5 s Redis waits by default for others to join it.
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--repl-diskless-sync-delay', '0', ...extra];
  let child: ChildProcess | undefined;

  const up = async (again: string[] = []) => {
    child = await launch('redis-server', [...args, ...again], dir);
    await waitFor(async () => await redisCli(port, 'ping') === 'PONG', `redis-server on port ${port} to answer`, child);
  };
  const down = async () => {
    if (child) await terminate(child);
    child = undefined;
  };

  await up();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    up,
    down,
    kill: async () => {
      const running = child;
      child = undefined;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
      running.kill('SIGKILL');
      await exited;
    },
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    stop: async () => {
      child?.kill('SIGCONT');
      await down();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A master and `count` sentinels monitoring it as `mymaster`; resolves once every sentinel knows the
 * master. With `replica`, a server replicating the master too, and (three sentinels or more) a
 * majority needed to fail over: it resolves once every sentinel knows the replica and the others,
 * so that a failover can happen.
 */
export async function startSentinel(count = 2, { replica: withReplica = false } = {}): Promise<RedisDeployment & { master: RedisServer; replica?: RedisServer }> {
  const master = await startRedis();
  const sentinels: Array<{ child: ChildProcess; dir: string; port: number }> = [];
  const quorum = count >= 3 ? Math.floor(count / 2) + 1 : 1;
  let replica: RedisServer | undefined;
  try {
    if (withReplica) {
      replica = await startRedis(['--replicaof', '127.0.0.1', String(master.port)]);
      await untilSynchronised(replica);
    }
    for (let i = 0; i < count; i += 1) {
      const dir = await mkdtemp(join(tmpdir(), 'sentinel-'));
      const port = await freePort();
      const config = join(dir, 'sentinel.conf');
      // Sentinel rewrites its configuration file as it learns, so each gets its own writable copy.
      await writeFile(config, [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor mymaster 127.0.0.1 ${master.port} ${quorum}`,
        'sentinel down-after-milliseconds mymaster 2000',
        'sentinel failover-timeout mymaster 10000',
        '',
      ].join('\n'));
      const child = await launch('redis-server', [config, '--sentinel'], dir);
      sentinels.push({ child, dir, port });
      await waitFor(async () => {
        const address = await redisCli(port, 'sentinel', 'get-master-addr-by-name', 'mymaster');
        return address.split('\n').join(':') === `127.0.0.1:${master.port}`;
      }, `sentinel on port ${port} to know the master`, child);
    }
    if (replica) {
      for (const { port, child } of sentinels) {
        await waitFor(async () => (await redisCli(port, 'sentinel', 'replicas', 'mymaster')).includes(String(replica!.port))
          && /^OK/.test(await redisCli(port, 'sentinel', 'ckquorum', 'mymaster')), `sentinel on port ${port} to know the replica and the other sentinels`, child);
      }
    }
  } catch (error) {
    await stopAll(sentinels);
    await replica?.stop();
    await master.stop();
    throw error;
  }
  return {
    url: `redis+sentinel://${sentinels.map(({ port }) => `127.0.0.1:${port}`).join(',')}/mymaster`,
    master,
    ...(replica ? { replica } : {}),
    stop: async () => {
      await stopAll(sentinels);
      await replica?.stop();
      await master.stop();
    },
  };
}

/** The address the sentinels of a `redis+sentinel:` URL give for `mymaster` now (`host:port`), as the first that answers says. */
export async function sentinelMaster(url: string): Promise<string | undefined> {
  for (const address of url.replace(/^redis\+sentinel:\/\//, '').split('/')[0]!.split(',')) {
    try {
      const reply = await redisCli(Number(address.split(':')[1]), 'sentinel', 'get-master-addr-by-name', 'mymaster');
      return reply.split('\n').join(':');
    } catch {
      // that sentinel does not answer: ask the next
    }
  }
  return undefined;
}

/** A primary and one server replicating it (`replicaof`): resolves once the replica has synchronised. */
export async function startReplicated(): Promise<RedisDeployment & { primary: RedisServer; replica: RedisServer }> {
  const primary = await startRedis();
  let replica: RedisServer | undefined;
  try {
    replica = await startRedis(['--replicaof', '127.0.0.1', String(primary.port)]);
    await untilSynchronised(replica);
  } catch (error) {
    await replica?.stop();
    await primary.stop();
    throw error;
  }
  return {
    url: primary.url,
    primary,
    replica,
    stop: async () => {
      await replica.stop();
      await primary.stop();
    },
  };
}

/** Until a replica reports its link to its primary up (and so has loaded the primary's data). */
export async function untilSynchronised(replica: RedisServer): Promise<void> {
  await waitFor(async () => /master_link_status:up/.test(await redisCli(replica.port, 'info', 'replication')), `the replica on port ${replica.port} to synchronise`);
}

/** One primary of a cluster and the servers replicating it. */
export interface Shard {
  primary: RedisServer;
  replicas: RedisServer[];
}

/**
 * `size` masters sharing the 16384 slots, each with `replicasEach` replicas; resolves once every
 * node reports cluster_state:ok and every replica has synchronised.
 */
export async function startCluster(size = 3, replicasEach = 0): Promise<RedisDeployment & { shards: Shard[] }> {
  const nodes: RedisServer[] = [];
  let shards: Shard[];
  try {
    for (let i = 0; i < size * (1 + replicasEach); i += 1) {
      // The cluster bus gets a free port of its own rather than the default port + 10000, which may be taken or out of range.
      nodes.push(await startRedis(async () => [
        '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-port', String(await freePort()), '--cluster-node-timeout', '2000',
      ]));
    }
    await run('redis-cli', ['--cluster', 'create', ...nodes.map(({ port }) => `127.0.0.1:${port}`), '--cluster-replicas', String(replicasEach), '--cluster-yes'], { timeout: 30_000 });
    for (const node of nodes) {
      await waitFor(async () => /cluster_state:ok/.test(await redisCli(node.port, 'cluster', 'info')), `cluster node ${node.port} to be ok`);
    }
    shards = await shardsOf(nodes);
    for (const replica of shards.flatMap((shard) => shard.replicas)) await untilSynchronised(replica);
  } catch (error) {
    await Promise.all(nodes.map((node) => node.stop()));
    throw error;
  }
  return {
    shards,
    url: `redis+cluster://${nodes.map(({ port }) => `127.0.0.1:${port}`).join(',')}`,
    stop: async () => {
      await Promise.all(nodes.map((node) => node.stop()));
    },
  };
}

/** The cluster's nodes by the primary each is or replicates (as `redis-cli --cluster create` paired them). */
async function shardsOf(nodes: RedisServer[]): Promise<Shard[]> {
  const roles = await Promise.all(nodes.map(async (node) => {
    const info = await redisCli(node.port, 'info', 'replication');
    return { node, primaryPort: /^role:slave/m.test(info) ? Number(/^master_port:(\d+)/m.exec(info)?.[1]) : undefined };
  }));
  return roles.filter(({ primaryPort }) => primaryPort === undefined).map(({ node }) => ({
    primary: node,
    replicas: roles.filter(({ primaryPort }) => primaryPort === node.port).map((role) => role.node),
  }));
}

/** A connected client of its own, to look at the keys a store wrote; the caller disconnects it. */
export async function rawRedis(url: string): Promise<RedisClient> {
  const client = connectRedis(url);
  try {
    await new Promise<void>((resolve, reject) => {
      if (client.status === 'ready') resolve();
      client.once('ready', () => resolve());
      setTimeout(() => reject(new Error('raw Redis client did not connect')), 5000).unref();
    });
  } catch (error) {
    client.disconnect();
    throw error;
  }
  return client;
}

/** Every key starting with `prefix`, with its PTTL (-1: none), read by SCAN on each master: for tests only. */
export async function keysUnder(url: string, prefix: string): Promise<Map<string, number>> {
  const client = await rawRedis(url);
  try {
    const masters = client instanceof Cluster ? client.nodes('master') : [client];
    const found = new Map<string, number>();
    for (const node of masters) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        for (const key of keys) found.set(key, await node.pttl(key));
        cursor = next;
      } while (cursor !== '0');
    }
    return found;
  } finally {
    client.disconnect();
  }
}

async function launch(command: string, args: string[], cwd: string): Promise<ChildProcess> {
  const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => { output = (output + chunk.toString()).slice(-4000); });
  child.stderr!.on('data', (chunk: Buffer) => { output = (output + chunk.toString()).slice(-4000); });
  Object.defineProperty(child, 'output', { get: () => output });
  running.add(child);
  child.once('exit', () => running.delete(child));
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  return child;
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5000).unref();
  });
}

async function stopAll(processes: Array<{ child: ChildProcess; dir: string }>): Promise<void> {
  await Promise.all(processes.map(async ({ child, dir }) => {
    await terminate(child);
    await rm(dir, { recursive: true, force: true });
  }));
}

async function waitFor(check: () => Promise<boolean>, what: string, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child && child.exitCode !== null) {
      throw new Error(`waiting for ${what}: the process exited with ${child.exitCode}\n${(child as ChildProcess & { output?: string }).output ?? ''}`);
    }
    try {
      if (await check()) return;
    } catch {
      // not answering yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
