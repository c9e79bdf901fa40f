import { Cluster, Command, type Redis } from 'ioredis';

import { systemClock } from '../../src/shared/clock.ts';
import { BackendUnavailableError, type ReplicaWait } from '../store.ts';

/**
 * Durable writes on Redis (REDIS_WAIT_REPLICAS): a write is acknowledged only once `replicas`
 * replicas hold it, asked with `WAIT replicas timeout` on the connection that made it, to the
 * primary that holds its key (in a cluster, one WAIT per primary the operation wrote to).
 *
 * WAIT counts the replicas that have what its own connection wrote so far, so one WAIT confirms
 * every write its connection made before it: writes that finish while one is in flight share the
 * next (at most one is in flight per connection, as Redis answers a connection's commands in order
 * and a WAIT holds the ones behind it). A connection is known by its socket: a write made on a
 * socket since replaced (a reconnect, a Sentinel failover) is never confirmed by a WAIT on the new
 * one, which would count nothing of it.
 *
 * When the replicas do not confirm in time, the write stays on the primary but is refused
 * (BackendUnavailableError, a 503 that hands the client nothing), and the connection is marked
 * behind: until a short WAIT finds the replicas caught up again (asked at most once a
 * PROBE_INTERVAL_MS), further durable writes through it are refused before they are made, so an
 * outage of the replicas neither applies a stream of writes nobody will be told of, nor holds
 * the connection for a whole timeout per write.
 */

/** How long the client waits for a WAIT's answer beyond the WAIT's own timeout before calling the connection dead. */
const ANSWER_SLACK_MS = 1000;
/** While a connection is behind: how often a write may ask whether its replicas have caught up, and how long that WAIT may take. */
const PROBE_INTERVAL_MS = 1000;
const PROBE_TIMEOUT_MS = 50;

/** A connection.ts RedisClient (not imported from there: connection.ts imports this file). */
type RedisClient = Redis | Cluster;

interface Flight {
  /** The last write (Link.written) this WAIT covers: those finished before it was sent. */
  readonly upTo: number;
  /** Settles once the state below is updated; undefined when the replicas confirmed. */
  outcome: Promise<BackendUnavailableError | undefined>;
}

/** What one socket to one primary has written and had confirmed, counted in durable writes. */
class Link {
  written = 0;
  confirmed = 0;
  inFlight: Flight | undefined;
  behind = false;
  probedAt = Number.NEGATIVE_INFINITY;
}

/** A primary an operation writes to, as its socket was when the operation started. */
interface Target {
  readonly node: Redis;
  readonly socket: object;
  readonly link: Link;
}

export class ReplicaConfirmation {
  readonly #wait: ReplicaWait;
  /** By socket: a new connection starts afresh, and a closed one's state goes with it. */
  readonly #links = new WeakMap<object, Link>();

  constructor(wait: ReplicaWait) {
    this.#wait = wait;
  }

  /**
   * Runs `work`, which writes `keys` (and any it reports through `alsoWrote` as it writes them),
   * then resolves once the replicas hold what it wrote. Rejects with BackendUnavailableError,
   * before `work` runs, when a primary of `keys` is behind; after it, when they did not confirm.
   */
  async durably<T>(client: RedisClient, keys: readonly string[], work: (client: RedisClient, alsoWrote: (keys: readonly string[]) => void) => Promise<T>): Promise<T> {
    const targets = new Map<Redis, Target>();
    const add = (node: Redis) => {
      const target = this.#target(node);
      const known = targets.get(node);
      if (!known) targets.set(node, target);
      else if (known.socket !== target.socket) throw reconnected();
    };
    const nodes = primaries(client, keys);
    // A cluster connects to a node when it first sends it a command; the socket a write will take must be known before it.
    await Promise.all(nodes.map(connected));
    nodes.forEach(add);
    await Promise.all([...targets.values()].map((target) => this.#ready(target)));
    const result = await work(client, (more) => primaries(client, more).forEach(add));
    // Where the keys are now: a cluster that moved one of their slots meanwhile took the write to another node, asked too.
    primaries(client, keys).forEach(add);
    await Promise.all([...targets.values()].map((target) => this.#confirm(target)));
    return result;
  }

  /** A primary with its socket now (a write just made went through it). */
  #target(node: Redis): Target {
    const socket: object | undefined = node.stream;
    if (node.status !== 'ready' || !socket) throw reconnected();
    let link = this.#links.get(socket);
    if (!link) {
      link = new Link();
      this.#links.set(socket, link);
    }
    return { node, socket, link };
  }

  /**
   * Before a write: it is not sent while a WAIT is in flight on its connection (it would queue
   * behind it, and be made even if the WAIT then finds the replicas behind), and it is refused
   * while the connection is behind, unless a short WAIT finds the replicas caught up.
   */
  async #ready(target: Target): Promise<void> {
    const { link } = target;
    while (link.inFlight) await link.inFlight.outcome;
    if (!link.behind) return;
    if (systemClock() - link.probedAt < PROBE_INTERVAL_MS) throw this.#unconfirmed('have not confirmed the last writes yet');
    link.probedAt = systemClock();
    const failure = await this.#send(target, Math.min(PROBE_TIMEOUT_MS, this.#wait.timeoutMs));
    if (failure) throw failure;
  }

  /** After a write: resolves once a WAIT sent after it says enough replicas hold it. */
  async #confirm(target: Target): Promise<void> {
    const { link } = target;
    link.written += 1;
    const mine = link.written;
    while (link.confirmed < mine) {
      const flight = link.inFlight;
      if (flight) {
        const failure = await flight.outcome;
        if (flight.upTo >= mine && failure) throw failure;
        continue;
      }
      // A WAIT sent before this write finished failed: another would hold the connection as long, for the same answer.
      if (link.behind) throw this.#unconfirmed('have not confirmed the last writes yet');
      const failure = await this.#send(target, this.#wait.timeoutMs);
      if (failure) throw failure;
    }
  }

  /** Sends one WAIT covering every write the link has finished; its outcome settles after the link's state is updated. */
  #send(target: Target, timeoutMs: number): Promise<BackendUnavailableError | undefined> {
    const { link } = target;
    const flight: Flight = { upTo: link.written, outcome: Promise.resolve(undefined) };
    flight.outcome = this.#replicasHolding(target, timeoutMs).then((replicas) => {
      if (link.inFlight === flight) link.inFlight = undefined;
      if (typeof replicas === 'number' && replicas >= this.#wait.replicas) {
        link.behind = false;
        link.confirmed = Math.max(link.confirmed, flight.upTo);
        return undefined;
      }
      link.behind = true;
      return replicas instanceof BackendUnavailableError ? replicas : this.#unconfirmed(`did not confirm within ${timeoutMs} ms (${replicas} did)`);
    });
    link.inFlight = flight;
    return flight.outcome;
  }

  /** WAIT on the target's own socket; the count it answers, or why it could not be asked. */
  async #replicasHolding(target: Target, timeoutMs: number): Promise<number | BackendUnavailableError> {
    if (target.node.status !== 'ready' || target.node.stream !== target.socket) return reconnected();
    const command = new Command('wait', [this.#wait.replicas, timeoutMs]);
    // Set before sending, this timeout is the command's (the connection's own is shorter than a WAIT may take).
    command.setTimeout(timeoutMs + ANSWER_SLACK_MS);
    try {
      void target.node.sendCommand(command);
      return Number(await command.promise);
    } catch (error) {
      return new BackendUnavailableError(`waiting for Redis replicas failed: ${(error as Error).message}`, { cause: error });
    }
  }

  #unconfirmed(what: string): BackendUnavailableError {
    return new BackendUnavailableError(`${this.#wait.replicas} Redis replica${this.#wait.replicas === 1 ? '' : 's'} (REDIS_WAIT_REPLICAS) ${what}`);
  }
}

function reconnected(): BackendUnavailableError {
  return new BackendUnavailableError('the connection to Redis changed before its replicas confirmed a write');
}

/** How long a write waits for a cluster node's connection to be made. */
const CONNECT_WAIT_MS = 1000;

/** Once the node's connection is ready: made now if it was never needed before, awaited (a bounded time) if it is being made. */
async function connected(node: Redis): Promise<void> {
  if (node.status === 'ready') return;
  const ready = nextReady(node);
  if (node.status === 'wait') node.connect().catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BackendUnavailableError('a Redis node did not connect in time')), CONNECT_WAIT_MS);
  });
  try {
    await Promise.race([ready, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A node's next `ready`, one listener for every write waiting on it (a burst of writes would otherwise add one each). */
const readiness = new WeakMap<Redis, Promise<void>>();

function nextReady(node: Redis): Promise<void> {
  let ready = readiness.get(node);
  if (!ready) {
    ready = new Promise<void>((resolve) => {
      node.once('ready', () => {
        readiness.delete(node);
        resolve();
      });
    });
    readiness.set(node, ready);
  }
  return ready;
}

/** The primaries that hold `keys`: the one server, or the cluster nodes of their slots as the client last learnt them. */
function primaries(client: RedisClient, keys: readonly string[]): Redis[] {
  if (!(client instanceof Cluster)) return [client];
  const byAddress = new Map(client.nodes('master').map((node) => [`${node.options.host}:${node.options.port}`, node]));
  const nodes = new Set<Redis>();
  for (const key of keys) {
    const slot = keySlot(key);
    const owner = client.slots[slot]?.[0];
    const node = owner === undefined ? undefined : byAddress.get(owner);
    if (!node) {
      // Its primary is gone (killed, failed over). No command goes out to teach the client where the slot went (the
      // write is refused before it is sent), so ask the cluster now: once a replica has taken over, the next write finds it.
      client.refreshSlotsCache();
      throw new BackendUnavailableError(`no Redis cluster primary is known for slot ${slot}`);
    }
    nodes.add(node);
  }
  return [...nodes];
}

/** CRC16-CCITT (XMODEM), the checksum Redis Cluster maps keys to slots with. */
const CRC16 = Uint16Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit += 1) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  return crc;
});

/** The cluster slot of a key: of its hash tag (the first `{...}` with something inside) when it has one. */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key);
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i += 1) crc = ((crc << 8) & 0xffff) ^ CRC16[((crc >> 8) ^ bytes[i]!) & 0xff]!;
  return crc % 16384;
}
