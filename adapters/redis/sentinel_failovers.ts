import type { Redis } from 'ioredis';

import { systemClock } from '../../src/shared/clock.ts';
import type { Logger } from '../../src/shared/logger.ts';
import type { HostPort } from './url.ts';

/**
 * A Sentinel failover of the master the store writes to, followed as the sentinels announce it, so
 * that no write is acknowledged by a master that is being replaced.
 *
 * Sentinel does not stop the old master when it promotes a replica (REPLICAOF NO ONE): the old
 * master keeps taking writes, and answers ROLE as a master, until Sentinel demotes it, which it does
 * only once the old master has gone on calling itself master for a while (about 10 s after a
 * planned `SENTINEL FAILOVER`). It then resynchronises from the new master and discards every write
 * it took meanwhile. Nothing asked of the old master tells, so the sentinels' announcements on their
 * Pub/Sub channels are followed instead. The elected sentinel announces each step of the failover,
 * the first (`+failover-state-select-slave`) two of its ticks (about 0.1 s) before it sends
 * REPLICAOF NO ONE; every sentinel announces the end (`+switch-master`) once it names the promoted
 * replica as the master.
 *
 * From the first announcement until the store's clients have reconnected after the last, a failover
 * is under way: connection.ts holds writes (a bounded time, then refuses them), and refuses a write
 * whose answer came after a failover was announced, as the old master may have made it after the
 * promotion. At `+switch-master` each client drops its connection, so that it asks the sentinels for
 * the master again (what ioredis's own `failoverDetector` does, here once for all the store's clients,
 * for this master only, and in step with the writes held). A failover abandoned (`-failover-abort-*`)
 * lets writes go on on the old master. A sentinel that has not learned of the switch yet still names
 * the old master, which still calls itself master: for MOVED_MS after a switch, the clients take that
 * name for the promoted master's (`natMap`). A failover no sentinel has said anything of for HOLD_MS (the
 * announcing sentinel gone mid-failover, or every subscription lost) is taken as ended: the clients
 * reconnect and writes go on wherever the sentinels then say the master is.
 *
 * Only the elected sentinel announces the start, and it may be one the storage URL does not name
 * (an operator naming one address for them all, or a sentinel added since). So every sentinel of
 * the master is listened to: those the known ones list (`SENTINEL sentinels`, asked at start, again
 * soon while none answers or when a named one reconnects, and every DISCOVERY_MS), each a sentinel
 * announces as it joins (`+sentinel`) or moves (`+sentinel-address-switch`). One that no sentinel
 * lists any more and that cannot be reached is forgotten, so addresses that changed (a restarted
 * pod) do not pile up.
 */

/** How long a failover may go unannounced before the store stops waiting for its end: a promotion is seen within about a second. */
const HOLD_MS = 10_000;
/** How long the clients are given to reconnect after the switch before writes go on regardless (each then waits for its connection). */
const RECONNECT_MS = 2000;
/**
 * How long after a switch a sentinel naming the old master is taken to name the new one: the
 * sentinels learn of a switch within milliseconds of each other, a sentinel cut off from the others
 * later, and about 10 s after a switch Sentinel demotes the old master, which ioredis then refuses
 * to use as a master of its own accord (it checks the role of the node a sentinel names).
 */
const MOVED_MS = 30_000;
/** How often the sentinels are asked which others watch the master. */
const DISCOVERY_MS = 60_000;
/** While no sentinel answers that question, it is asked again after this, doubling up to DISCOVERY_MS. */
const DISCOVERY_RETRY_MS = 1000;
/** The most sentinels listened to: a group has a handful; past this a new address is not followed (and said so). */
const MAX_SENTINELS = 32;

/** The steps the elected sentinel announces between choosing a replica and switching to it. */
const PROGRESS = ['+failover-state-*', '+selected-slave', '+promoted-slave', '+slave-reconf-*', '+failover-end*'];
const SWITCH = '+switch-master';
const ABORT = '-failover-abort-*';
/** A sentinel announcing another that joined the group: `sentinel <run id> <ip> <port> @ <master> <ip> <port>`. */
const JOINED = '+sentinel';
/** A sentinel announcing another's new address: `master <master> <ip> <port> ip <new ip> port <new port> for <run id>`. */
const MOVED = '+sentinel-address-switch';

/** How the failovers' sentinels are reached: a subscriber for each, kept; and a client to ask one a question, used once. */
export interface SentinelClients {
  subscriber(address: HostPort): Redis;
  asker(address: HostPort): Redis;
  /** Told once when a sentinel is not listened to, MAX_SENTINELS being listened to already. */
  warn: Logger['warn'];
}

interface Hold {
  /** The sentinel that announced the failover last: only its abort ends it. */
  announcedBy: Redis;
  /** Until the clients follow: ends the hold if nothing is announced for HOLD_MS. Then: lets writes go on after RECONNECT_MS. */
  timer: NodeJS.Timeout | undefined;
  /** The clients are reconnecting to the promoted master. */
  following: boolean;
  /** Stops listening for the clients' reconnections. */
  unlisten: Array<() => void>;
}

export class SentinelFailovers {
  readonly #master: string;
  readonly #clients: Redis[] = [];
  readonly #connect: SentinelClients;
  /** The sentinels the URL names: asked for the others. */
  readonly #named: readonly HostPort[];
  /** Every sentinel listened to, by `host:port`. */
  readonly #sentinels = new Map<string, Redis>();
  /** Where each sentinel whose run id is known is listened to: a sentinel named by one address and listed by another is one. */
  readonly #runIds = new Map<string, string>();
  #discovery: NodeJS.Timeout | undefined;
  #discovering = false;
  #retryMs = DISCOVERY_RETRY_MS;
  #warnedFull = false;
  readonly #waiting = new Set<() => void>();
  #hold: Hold | undefined;
  /** The last switch announced: the old master's address (as a sentinel names it, `host:port`), the new master's, until when. */
  #moved: { from: string; to: HostPort; until: number } | undefined;
  #announced = 0;
  #closed = false;

  /**
   * Follows the failovers of the master named `master` that its sentinels announce: those the URL
   * names (`named`), and the others they know of.
   */
  constructor(master: string, named: readonly HostPort[], connect: SentinelClients) {
    this.#master = master;
    this.#named = named;
    this.#connect = connect;
    for (const address of named) this.#listen(address)?.on('ready', () => void this.#discover());
    void this.#discover();
  }

  /** A client of the store, to reconnect at each switch; its `natMap` must be this one's. */
  follows(client: Redis): void {
    this.#clients.push(client);
  }

  /** ioredis's `natMap` for the store's clients: the master a sentinel names, unless that is the master just replaced. */
  readonly natMap = (address: string): HostPort | null => {
    const moved = this.#moved;
    return moved && moved.from === address && systemClock() < moved.until ? moved.to : null;
  };

  /** How many failovers have been announced: a write answered after this changed may have been made by the old master. */
  get announced(): number {
    return this.#announced;
  }

  get underWay(): boolean {
    return this.#hold !== undefined;
  }

  /** Resolves true once no failover is under way, false if one still is after `ms`. */
  settled(ms: number): Promise<boolean> {
    if (!this.#hold) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiting.delete(done);
        resolve(!this.#hold);
      };
      const timer = setTimeout(done, ms);
      this.#waiting.add(done);
    });
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#discovery);
    this.#release();
    for (const sentinel of this.#sentinels.values()) sentinel.disconnect();
  }

  /**
   * Listens to the sentinel at `address` (once); its subscriber, or undefined when it is not
   * listened to. With its run id, one subscriber a sentinel: at the address the URL names it by,
   * when it names it, also while that connection is being made again (ioredis retries it), and in
   * place of any other address it is heard at; else not when it is heard at another address
   * already, and in place of that address when it cannot be reached there (the sentinel moved).
   */
  #listen(address: HostPort, runId?: string): Redis | undefined {
    const key = addressKey(address);
    if (this.#closed) return undefined;
    if (runId !== undefined) {
      const heardAt = this.#runIds.get(runId);
      if (heardAt !== undefined && heardAt !== key) {
        if (this.#isNamed(heardAt)) return undefined;
        if (!this.#isNamed(key) && this.#sentinels.get(heardAt)?.status === 'ready') return undefined;
        this.#forget(heardAt);
      }
      this.#runIds.set(runId, key);
    }
    if (this.#sentinels.has(key)) return undefined;
    if (this.#sentinels.size >= MAX_SENTINELS) {
      if (!this.#warnedFull) this.#connect.warn('a Sentinel is not listened to: the most the store follows are listened to already', { sentinel: key, most: MAX_SENTINELS });
      this.#warnedFull = true;
      return undefined;
    }
    const sentinel = this.#connect.subscriber(address);
    this.#sentinels.set(key, sentinel);
    // A sentinel that cannot be reached is tried again by its client; the others still announce.
    sentinel.on('error', () => undefined);
    sentinel.on('pmessage', (pattern: string, channel: string, message: string) => this.#announcement(sentinel, pattern, channel, message));
    sentinel.psubscribe(...PROGRESS, SWITCH, ABORT, JOINED, MOVED).catch(() => undefined);
    return sentinel;
  }

  #isNamed(key: string): boolean {
    return this.#named.some((address) => addressKey(address) === key);
  }

  #forget(key: string): void {
    this.#sentinels.get(key)?.disconnect();
    this.#sentinels.delete(key);
    for (const [runId, heardAt] of this.#runIds) if (heardAt === key) this.#runIds.delete(runId);
  }

  /**
   * Asks every sentinel known which others watch the master, listens to those, and forgets one
   * that the URL does not name, that none of them listed and that cannot be reached now. Asked
   * again after DISCOVERY_MS, or sooner while none answers. A round under way is not doubled.
   */
  async #discover(): Promise<void> {
    if (this.#closed || this.#discovering) return;
    this.#discovering = true;
    clearTimeout(this.#discovery);
    try {
      const listed = await this.#listedByAny();
      if (listed) {
        for (const { address, runId } of listed.values()) this.#listen(address, runId);
        this.#forgetUnlisted(listed);
        this.#retryMs = DISCOVERY_RETRY_MS;
      }
      if (!this.#closed) {
        this.#discovery = setTimeout(() => void this.#discover(), listed ? DISCOVERY_MS : this.#retryMs).unref();
        if (!listed) this.#retryMs = Math.min(this.#retryMs * 2, DISCOVERY_MS);
      }
    } finally {
      this.#discovering = false;
    }
  }

  /**
   * What the sentinels known now, and those they list in turn, answer together (a sentinel does
   * not list itself; one asked says its own run id), each sentinel asked once however it is
   * addressed; undefined when none answers.
   */
  async #listedByAny(): Promise<Map<string, ListedSentinel> | undefined> {
    const known = (key: string): ListedSentinel => ({ address: parseAddress(key), runId: [...this.#runIds].find(([, heardAt]) => heardAt === key)?.[0] });
    const queue: ListedSentinel[] = [...this.#named.map((address) => ({ address })), ...[...this.#sentinels.keys()].map(known)];
    const asked = new Set<string>();
    let answered = false;
    const listed = new Map<string, ListedSentinel>();
    for (let next = queue.shift(); next && asked.size < MAX_SENTINELS && !this.#closed; next = queue.shift()) {
      const key = addressKey(next.address);
      if (asked.has(key) || (next.runId !== undefined && asked.has(next.runId))) continue;
      asked.add(key);
      const asker = this.#connect.asker(next.address);
      asker.on('error', () => undefined);
      try {
        const [answer, ownId] = await Promise.all([
          asker.call('SENTINEL', 'sentinels', this.#master),
          asker.call('SENTINEL', 'myid').catch(() => undefined),
        ]);
        answered = true;
        const runId = typeof ownId === 'string' && ownId !== '' ? ownId : next.runId;
        if (runId !== undefined) asked.add(runId);
        listed.set(key, { address: next.address, runId });
        for (const other of sentinelsIn(answer)) {
          if (!listed.has(addressKey(other.address))) listed.set(addressKey(other.address), other);
          queue.push(other);
        }
      } catch {
        // Not reachable now, or not a sentinel of this master: the others are asked.
      } finally {
        asker.disconnect();
      }
    }
    return answered ? listed : undefined;
  }

  #forgetUnlisted(listed: ReadonlyMap<string, ListedSentinel>): void {
    for (const [key, sentinel] of [...this.#sentinels]) {
      if (this.#isNamed(key) || listed.has(key) || sentinel.status === 'ready') continue;
      this.#forget(key);
    }
  }

  #announcement(sentinel: Redis, pattern: string, channel: string, message: string): void {
    if (this.#closed || masterOf(channel, message) !== this.#master) return;
    if (pattern === JOINED || pattern === MOVED) {
      const other = pattern === JOINED ? joinedSentinel(message) : movedSentinel(message);
      if (other) this.#listen(other.address, other.runId);
    } else if (pattern === ABORT) {
      if (this.#hold?.announcedBy === sentinel && !this.#hold.following) this.#release();
    } else if (pattern === SWITCH) {
      if (this.#switched(message)) this.#follow(sentinel);
    } else {
      this.#holdFor(sentinel);
    }
  }

  /**
   * Keeps the addresses of a switch; false for one already announced by another sentinel (every
   * sentinel announces it): the clients have followed it, or are following it, already.
   */
  #switched(message: string): boolean {
    const [, oldHost, oldPort, newHost, newPort] = message.split(' ');
    if (!oldHost || !oldPort || !newHost || !newPort) return true;
    const from = `${oldHost}:${oldPort}`;
    const to = { host: newHost, port: Number(newPort) };
    const moved = this.#moved;
    if (moved && moved.from === from && moved.to.host === to.host && moved.to.port === to.port && systemClock() < moved.until) return false;
    this.#moved = { from, to, until: systemClock() + MOVED_MS };
    return true;
  }

  /** Starts holding writes, or, until the clients follow, keeps holding them for HOLD_MS more. */
  #holdFor(sentinel: Redis): Hold {
    let hold = this.#hold;
    if (!hold) {
      this.#announced += 1;
      hold = { announcedBy: sentinel, timer: undefined, following: false, unlisten: [] };
      this.#hold = hold;
    }
    hold.announcedBy = sentinel;
    if (!hold.following) {
      clearTimeout(hold.timer);
      hold.timer = setTimeout(() => this.#follow(sentinel), HOLD_MS).unref();
    }
    return hold;
  }

  /**
   * Makes every client ask the sentinels for the master again, and lets writes go on once each that
   * was connected has reconnected (or after RECONNECT_MS). Every sentinel announces the switch,
   * within milliseconds of each other: one announced while the clients reconnect is the same switch.
   *
   * A connected client drops its connection. One waiting to reconnect asks the sentinels after the
   * switch by itself. One connecting may have been told the old master before the switch: it drops
   * the connection once made. (Dropping it sooner would end it for good: ioredis gives up on a
   * client whose connection is dropped while it asks a sentinel.)
   */
  #follow(sentinel: Redis): void {
    const hold = this.#holdFor(sentinel);
    if (hold.following) return;
    hold.following = true;
    clearTimeout(hold.timer);
    hold.timer = setTimeout(() => this.#release(), RECONNECT_MS).unref();
    let waiting = 0;
    const done = () => {
      waiting -= 1;
      if (waiting === 0) this.#release();
    };
    const reconnect = (client: Redis) => {
      waiting += 1;
      this.#onNext(hold, client, ['ready', 'end'], done);
      client.disconnect(true);
    };
    for (const client of this.#clients) {
      if (client.status === 'ready' || client.status === 'connect') {
        reconnect(client);
      } else if (client.status === 'connecting') {
        waiting += 1;
        this.#onNext(hold, client, ['ready', 'close', 'end'], (event) => {
          if (event === 'ready') reconnect(client);
          done();
        });
      }
    }
    if (waiting === 0) this.#release();
  }

  /** Calls `then` with the first of `events` that `client` emits, unless the hold ends first. */
  #onNext(hold: Hold, client: Redis, events: readonly string[], then: (event: string) => void): void {
    const listeners = events.map((event) => {
      const listener = () => {
        unlisten();
        then(event);
      };
      client.on(event, listener);
      return [event, listener] as const;
    });
    const unlisten = () => {
      for (const [event, listener] of listeners) client.off(event, listener);
    };
    hold.unlisten.push(unlisten);
  }

  /** Ends the failover under way and wakes the writes waiting for it. */
  #release(): void {
    const hold = this.#hold;
    if (!hold) return;
    clearTimeout(hold.timer);
    for (const unlisten of hold.unlisten) unlisten();
    this.#hold = undefined;
    for (const waiter of [...this.#waiting]) waiter();
  }
}

/**
 * The master an announcement is about: `+switch-master <master> <old ip> <old port> <new ip> <new
 * port>`; of the master itself `master <master> <ip> <port>`; of a replica or another sentinel
 * `<kind> <name> <ip> <port> @ <master> <ip> <port>`.
 */
function masterOf(channel: string, message: string): string | undefined {
  const words = message.split(' ');
  if (channel === SWITCH) return words[0];
  const at = words.indexOf('@');
  if (at !== -1) return words[at + 1];
  return words[0] === 'master' ? words[1] : undefined;
}

function addressKey({ host, port }: HostPort): string {
  return `${host}:${port}`;
}

function parseAddress(key: string): HostPort {
  const colon = key.lastIndexOf(':');
  return { host: key.slice(0, colon), port: Number(key.slice(colon + 1)) };
}

/** A host and port as a sentinel gives them, or undefined when they cannot be one. */
function hostPort(host: unknown, port: unknown): HostPort | undefined {
  const number = Number(port);
  return typeof host === 'string' && host !== '' && Number.isInteger(number) && number > 0 && number < 65536 ? { host, port: number } : undefined;
}

/** A sentinel another names: where it listens, and its run id when that is said. */
interface ListedSentinel {
  address: HostPort;
  runId?: string | undefined;
}

function runIdOf(value: unknown): string | undefined {
  return typeof value === 'string' && /^[0-9a-f]{40}$/i.test(value) ? value : undefined;
}

/** The sentinel that joined, in `sentinel <run id> <ip> <port> @ <master> <ip> <port>`. */
function joinedSentinel(message: string): ListedSentinel | undefined {
  const words = message.split(' ');
  const address = words[0] === 'sentinel' ? hostPort(words[2], words[3]) : undefined;
  return address && { address, runId: runIdOf(words[1]) };
}

/** The sentinel that moved and its new address, in `master <master> <ip> <port> ip <new ip> port <new port> for <run id>`. */
function movedSentinel(message: string): ListedSentinel | undefined {
  const words = message.split(' ');
  const ip = words.indexOf('ip');
  const port = words.indexOf('port');
  const address = ip !== -1 && port === ip + 2 ? hostPort(words[ip + 1], words[port + 1]) : undefined;
  return address && { address, runId: runIdOf(words[words.indexOf('for') + 1]) };
}

/** The sentinels in a `SENTINEL sentinels` answer: for each, its fields as name, value pairs (`ip`, `port`, `runid`, ...). */
function sentinelsIn(answer: unknown): ListedSentinel[] {
  if (!Array.isArray(answer)) return [];
  const sentinels: ListedSentinel[] = [];
  for (const fields of answer) {
    if (!Array.isArray(fields)) continue;
    const field = (name: string) => {
      const at = fields.indexOf(name);
      return at !== -1 && at % 2 === 0 ? fields[at + 1] : undefined;
    };
    const address = hostPort(field('ip'), field('port'));
    if (address) sentinels.push({ address, runId: runIdOf(field('runid')) });
  }
  return sentinels;
}
