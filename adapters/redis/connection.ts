import { createHash } from 'node:crypto';
import { isIP } from 'node:net';

import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

import { systemClock } from '../../src/shared/clock.ts';
import type { Logger } from '../../src/shared/logger.ts';
import { ReplicaConfirmation } from './replication.ts';
import { SentinelFailovers } from './sentinel_failovers.ts';
import { parseRedisUrl, type RedisTarget } from './url.ts';
import { BackendUnavailableError, DuplicateError, StoreOpenError, type ReplicaWait } from '../store.ts';

/** One server, a Sentinel-managed master, or a cluster: the commands the store uses are the same on each. */
export type RedisClient = Redis | Cluster;

/**
 * Bounds that make an unreachable Redis fail a request within about a second instead of holding it:
 * connecting, each command, and waiting for a connection that is being re-established.
 */
const CONNECT_TIMEOUT_MS = 1000;
const COMMAND_TIMEOUT_MS = 1000;
const READY_WAIT_MS = 1000;
/** How long an undo keeps trying while no primary answers: a failover promotes a replica within seconds. */
const UNDO_WAIT_MS = 10_000;
/** Reconnects back off to once a second, so the store recovers within about a second of Redis coming back. */
const reconnectDelay = (attempt: number) => Math.min(attempt * 100, 1000);

/**
 * Options every connection to a data node shares. Commands are never queued while disconnected
 * (enableOfflineQueue false) nor re-sent after a reconnect (maxRetriesPerRequest 0,
 * autoResendUnfulfilledCommands false): a write the caller was told had failed must not be
 * applied later behind its back. RESP2 is spoken because every Redis server understands it.
 */
function nodeOptions(target: RedisTarget, commandTimeout: number): RedisOptions {
  return {
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    protocol: 2,
  };
}

/**
 * A client for a storage URL; it starts connecting at once, in the background. `queuedBehindMs`:
 * how long a command may wait on its connection behind another that holds it (a WAIT), on top of
 * the time any command is given.
 */
export function connectRedis(url: string, queuedBehindMs = 0, failovers?: SentinelFailovers): RedisClient {
  const target = parseRedisUrl(url);
  const commandTimeout = COMMAND_TIMEOUT_MS + queuedBehindMs;
  switch (target.mode) {
    case 'standalone':
      return new Redis({
        ...nodeOptions(target, commandTimeout),
        host: target.node.host,
        port: target.node.port,
        db: target.db,
        // SNI names a host, never an address (RFC 6066 section 3; Node warns at one).
        ...(target.tls ? { tls: isIP(target.node.host) ? {} : { servername: target.node.host } } : {}),
        enableOfflineQueue: false,
        retryStrategy: reconnectDelay,
      });
    case 'sentinel': {
      const client = new Redis({
        ...nodeOptions(target, commandTimeout),
        sentinels: target.sentinels,
        name: target.name,
        db: target.db,
        sentinelCommandTimeout: COMMAND_TIMEOUT_MS,
        sentinelRetryStrategy: reconnectDelay,
        enableOfflineQueue: false,
        retryStrategy: reconnectDelay,
        // A master demoted without its clients being dropped (REPLICAOF sent by hand) refuses writes
        // with READONLY: the sentinels are asked again rather than the refusals going on. The
        // command is not sent again (true, not 2): it was answered as failed.
        reconnectOnError: (error) => /^READONLY\b/.test(error.message),
        ...(failovers ? { natMap: failovers.natMap } : {}),
      });
      failovers?.follows(client);
      return client;
    }
    case 'cluster': {
      const options: ClusterOptions = {
        redisOptions: nodeOptions(target, commandTimeout),
        enableOfflineQueue: false,
        clusterRetryStrategy: reconnectDelay,
        slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
      };
      return new Cluster(target.nodes, options);
    }
  }
}

/**
 * For a `redis+sentinel:` URL, the failovers its sentinels announce (sentinel_failovers.ts), for the
 * store's clients to follow (connectRedis); nothing for another URL. One subscriber per sentinel of
 * the master: those of the URL and those they know of.
 */
export function watchSentinelFailovers(url: string, warn: Logger['warn'] = () => undefined): SentinelFailovers | undefined {
  const target = parseRedisUrl(url);
  if (target.mode !== 'sentinel') return undefined;
  return new SentinelFailovers(target.name, target.sentinels, {
    // A subscription waits for its sentinel however long that is unreachable (maxRetriesPerRequest null), and is made again on each reconnect.
    subscriber: ({ host, port }) => new Redis({ host, port, connectTimeout: CONNECT_TIMEOUT_MS, retryStrategy: reconnectDelay, maxRetriesPerRequest: null, protocol: 2 }),
    // One question, answered within the command timeout or not at all: it is asked again later.
    asker: ({ host, port }) => new Redis({
      host, port, connectTimeout: CONNECT_TIMEOUT_MS, commandTimeout: COMMAND_TIMEOUT_MS, retryStrategy: () => null, maxRetriesPerRequest: 0, protocol: 2,
    }),
    warn,
  });
}

/** A write's work: `alsoWrote` names keys it wrote beyond those it was started with (found as it went). */
export type DurableWork<T> = (client: RedisClient, alsoWrote: (keys: readonly string[]) => void) => Promise<T>;

/**
 * The store's connection: runs work once the connection is ready (waiting a bounded time
 * while it is being established or re-established) and reports Redis being unreachable as
 * BackendUnavailableError, which the HTTP layer answers with 503.
 *
 * With `durable` (REDIS_WAIT_REPLICAS), writes run by runDurable go through a connection of
 * their own, on which each is followed by a WAIT for the replicas (replication.ts): a WAIT holds
 * the commands behind it on its connection, and reads, counters and the revocation list's polling
 * should not queue behind one.
 *
 * With `failovers` (a Sentinel-managed master), writes wait while a failover is under way and are
 * refused when one began before their answer came (sentinel_failovers.ts).
 */
export class RedisConnection {
  readonly #client: RedisClient;
  readonly #durable: { connection: RedisConnection; replicas: ReplicaConfirmation } | undefined;
  readonly #failovers: SentinelFailovers | undefined;
  readonly #waiting = new Set<() => void>();
  #lastError: string | undefined;
  /** Redis refused the database STORE names: ioredis carries on in database 0, where nothing may run. */
  #refusedDatabase: string | undefined;
  #closed = false;

  constructor(client: RedisClient, durable?: { client: RedisClient; wait: ReplicaWait }, failovers?: SentinelFailovers) {
    this.#client = client;
    this.#failovers = failovers;
    this.#durable = durable && { connection: new RedisConnection(durable.client), replicas: new ReplicaConfirmation(durable.wait) };
    // Listening is also what keeps ioredis from printing every failed reconnect as unhandled.
    client.on('error', (error: Error) => {
      // A command refused while there is no connection says nothing of why there is none.
      if (!NO_CONNECTION.test(error.message)) this.#lastError = error.message;
      if (DATABASE_REFUSED.test(error.message)) this.#refusedDatabase = error.message;
    });
    if (client instanceof Cluster) client.on('node error', (error: Error) => { this.#lastError = error.message; });
    client.on('ready', () => {
      this.#lastError = undefined;
      this.#wake();
    });
  }

  async run<T>(work: (client: RedisClient) => Promise<T>): Promise<T> {
    if (this.#closed) throw new BackendUnavailableError('the Redis store is closed');
    if (this.#client.status !== 'ready') await this.#ready();
    if (this.#refusedDatabase) throw new StoreOpenError(`Redis has no database of the number the URL names (${this.#refusedDatabase}); name one it has (0 unless its "databases" setting allows more)`);
    try {
      return await work(this.#client);
    } catch (error) {
      throw mapped(error);
    }
  }

  /**
   * Runs a write that must survive a failover: with REDIS_WAIT_REPLICAS, it resolves only once
   * that many replicas hold what it wrote to `keys` (and to those it names through `alsoWrote`),
   * and rejects with BackendUnavailableError when they do not confirm in time; without, as run().
   */
  runDurable<T>(keys: readonly string[], work: DurableWork<T>): Promise<T> {
    if (!this.#durable) return this.#onTheMaster(() => this.run((client) => work(client, () => undefined)));
    const { connection, replicas } = this.#durable;
    return this.#onTheMaster(() => connection.run((client) => replicas.durably(client, keys, work)));
  }

  /**
   * Runs a write that undoes one the caller will answer as failed (a code or refresh token used up
   * is given back), not waiting for replicas. While no primary answers, it keeps trying for up to
   * UNDO_WAIT_MS, so that a replica promoted meanwhile gets it before the client retries.
   */
  async undo<T>(work: (client: RedisClient) => Promise<T>): Promise<T> {
    const deadline = systemClock() + UNDO_WAIT_MS;
    for (;;) {
      try {
        return await this.#onTheMaster(() => this.run(work));
      } catch (error) {
        if (!(error instanceof BackendUnavailableError) || this.#closed || systemClock() >= deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#failovers?.close();
    await this.#durable?.connection.close();
    this.#wake();
    try {
      // QUIT lets Redis finish what this connection sent; a Redis that does not answer is not waited for.
      if (this.#client.status === 'ready') await withTimeout(this.#client.quit(), COMMAND_TIMEOUT_MS);
    } catch {
      // Disconnected below either way.
    } finally {
      this.#client.disconnect();
    }
  }

  /**
   * Runs a write once no failover of a Sentinel-managed master is under way (waiting up to
   * READY_WAIT_MS for it to end), and refuses it when one was announced before its answer came: the
   * master that made it may have been replaced already, and would discard it on being demoted.
   */
  async #onTheMaster<T>(write: () => Promise<T>): Promise<T> {
    const failovers = this.#failovers;
    if (!failovers) return write();
    if (failovers.underWay && !await failovers.settled(READY_WAIT_MS)) {
      throw new BackendUnavailableError('Redis store unavailable: a Sentinel failover of the master is under way');
    }
    const announced = failovers.announced;
    const result = await write();
    if (failovers.announced !== announced) {
      throw new BackendUnavailableError('Redis store unavailable: a Sentinel failover of the master began before the write was answered, which the old master may have made after the promotion');
    }
    return result;
  }

  #ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiting.delete(done);
        if (this.#closed) reject(new BackendUnavailableError('the Redis store is closed'));
        else resolve();
      };
      const timer = setTimeout(() => {
        this.#waiting.delete(done);
        reject(new BackendUnavailableError(`Redis is not reachable: ${this.#lastError ?? `no connection within ${READY_WAIT_MS} ms`}`));
      }, READY_WAIT_MS);
      this.#waiting.add(done);
    });
  }

  #wake(): void {
    for (const waiter of [...this.#waiting]) waiter();
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** ioredis refusing a command while it has no connection (its offline queue is off). */
const NO_CONNECTION = /Stream isn't writeable/;

/** Redis's answer to SELECT of a database it does not have; ioredis reports it as an error event and goes on in database 0. */
const DATABASE_REFUSED = /DB index is out of range|invalid DB index/i;

/** Redis refusing work for a while (loading, failing over, out of memory, not authenticated): unavailable, not a bug. */
const UNAVAILABLE_REPLY = /^(LOADING|READONLY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|BUSY|OOM|NOAUTH|WRONGPASS|NOREPLICAS|MISCONF)\b/;

/**
 * Connection failures, timeouts and the replies above become BackendUnavailableError. Other
 * replies (a wrong command, a failing script) and errors of this code's own are left as they are:
 * they are bugs, and answering them with 503 would hide them.
 */
export function mapped(error: unknown): unknown {
  if (!(error instanceof Error) || error instanceof BackendUnavailableError || error instanceof DuplicateError) return error;
  if (error instanceof TypeError || error instanceof SyntaxError || error instanceof RangeError || error instanceof ReferenceError) return error;
  if (error.name === 'ReplyError' && !isUnavailableReply(error)) return error;
  const reason = refusedTransaction(error)?.message ?? error.message;
  const refusal = error.name === 'ReplyError' ? UNAVAILABLE_REPLY.exec(reason)?.[1] : undefined;
  return new BackendUnavailableError(`Redis store unavailable: ${reason}`, { cause: error, refusal });
}

function isUnavailableReply(error: Error): boolean {
  return UNAVAILABLE_REPLY.test(error.message) || refusedTransaction(error) !== undefined;
}

/**
 * The refusal that made Redis discard a transaction (MULTI ... EXEC): Redis answers EXEC with
 * EXECABORT once it has refused a queued command, as it refuses every one while out of memory,
 * and ioredis hands the queued commands' errors along with it.
 */
function refusedTransaction(error: Error): Error | undefined {
  if (!/^EXECABORT\b/.test(error.message)) return undefined;
  const { previousErrors } = error as Error & { previousErrors?: unknown };
  if (!Array.isArray(previousErrors)) return undefined;
  return previousErrors.find((queued): queued is Error => queued instanceof Error && UNAVAILABLE_REPLY.test(queued.message));
}

/**
 * The Lua the Redis store runs, each script one atomic step, kept beside the store that runs it. A
 * script touches only the keys it is given in KEYS, and those share a hash tag (or are one key), so
 * each runs on one cluster node. Times: expiries of engine records are milliseconds since the
 * epoch, revocation times seconds; "now" inside a script is the server's clock (TIME), the clock
 * that expires keys.
 */

/** Numbers go to Redis as integer strings (%d): how Lua would print a 13-digit millisecond time is left to no version's choice. */
export const NOW_MS = `
local time = redis.call('TIME')
local now = string.format('%d', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
`;

/**
 * A Lua script run by its SHA-1 (EVALSHA), sent in full only when the server does not have it yet
 * (after a restart or on a node met for the first time). Every key it touches is passed in KEYS,
 * so a cluster routes it to the node holding them; all of them share one hash tag.
 */
export class Script {
  readonly #lua: string;
  readonly #sha: string;

  constructor(lua: string) {
    this.#lua = lua;
    this.#sha = createHash('sha1').update(lua).digest('hex');
  }

  async run(client: RedisClient, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
    try {
      return await client.evalsha(this.#sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return client.eval(this.#lua, keys.length, ...keys, ...args);
    }
  }
}
