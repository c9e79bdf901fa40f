/**
 * Redis storage URLs, parsed without connecting, so configuration can refuse a malformed one at
 * start with a message that says what is wrong (and never repeats the password).
 *
 *   redis://[user:pass@]host[:port][/db]                           one server
 *   rediss://[user:pass@]host[:port][/db]                          one server over TLS
 *   redis+sentinel://[user:pass@]host[:port],host[:port]/master[/db]  the master a Sentinel group names
 *   redis+cluster://[user:pass@]host[:port],host[:port]            a Redis Cluster (seed nodes)
 *
 * Credentials are those of the data nodes (the master, the cluster nodes); the sentinels are
 * expected to accept connections without them.
 */

export const REDIS_SCHEMES = ['redis:', 'rediss:', 'redis+sentinel:', 'redis+cluster:'] as const;

export interface HostPort {
  host: string;
  port: number;
}

interface Credentials {
  username?: string;
  password?: string;
}

export type RedisTarget = Credentials & (
  | { mode: 'standalone'; node: HostPort; db: number; tls: boolean }
  | { mode: 'sentinel'; sentinels: HostPort[]; name: string; db: number }
  | { mode: 'cluster'; nodes: HostPort[] }
);

const EXAMPLES: Record<(typeof REDIS_SCHEMES)[number], string> = {
  'redis:': 'redis://127.0.0.1:6379/0',
  'rediss:': 'rediss://user:pass@redis.example.com:6380',
  'redis+sentinel:': 'redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster',
  'redis+cluster:': 'redis+cluster://10.0.0.1:6379,10.0.0.2:6379',
};

export function isRedisUrl(url: string): boolean {
  return REDIS_SCHEMES.some((scheme) => url.startsWith(`${scheme}//`));
}

/** Parses a Redis storage URL; throws a TypeError naming the part that is wrong. */
export function parseRedisUrl(url: string): RedisTarget {
  const scheme = REDIS_SCHEMES.find((candidate) => url.startsWith(`${candidate}//`));
  if (!scheme) throw new TypeError(`a Redis storage URL starts with ${REDIS_SCHEMES.map((s) => `${s}//`).join(', ')}`);
  const fail = (problem: string): never => {
    throw new TypeError(`${scheme} storage URL ${problem}, e.g. ${EXAMPLES[scheme]}`);
  };

  const rest = url.slice(scheme.length + 2);
  if (/[?#]/.test(rest)) fail('takes no query or fragment');
  const slash = rest.indexOf('/');
  const authority = slash === -1 ? rest : rest.slice(0, slash);
  const path = slash === -1 ? '' : rest.slice(slash + 1);
  const at = authority.lastIndexOf('@');
  const credentials = at === -1 ? {} : parseCredentials(authority.slice(0, at), fail);
  const hostList = at === -1 ? authority : authority.slice(at + 1);
  const defaultPort = scheme === 'redis+sentinel:' ? 26379 : 6379;
  const hosts = hostList === '' ? fail('needs a host') : hostList.split(',').map((entry) => parseHost(entry, defaultPort, fail));

  switch (scheme) {
    case 'redis:':
    case 'rediss:': {
      if (hosts.length !== 1) fail('names one host (use redis+sentinel: or redis+cluster: for several)');
      return { mode: 'standalone', node: hosts[0]!, db: parseDb(path, fail), tls: scheme === 'rediss:', ...credentials };
    }
    case 'redis+sentinel:': {
      const [name = '', db = '', ...extra] = path.split('/');
      if (!name || extra.length) fail('needs the master name after the hosts, optionally followed by /db');
      return { mode: 'sentinel', sentinels: hosts, name: decode(name, fail), db: parseDb(db, fail), ...credentials };
    }
    case 'redis+cluster:': {
      if (path !== '') fail('takes no path (a cluster has one database)');
      return { mode: 'cluster', nodes: hosts, ...credentials };
    }
  }
}

/** The URL as it may be shown or logged: without its credentials, every port and database named. */
export function shownRedisUrl(target: RedisTarget): string {
  const hosts = (nodes: HostPort[]) => nodes.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`).join(',');
  switch (target.mode) {
    case 'standalone':
      return `${target.tls ? 'rediss' : 'redis'}://${hosts([target.node])}/${target.db}`;
    case 'sentinel':
      return `redis+sentinel://${hosts(target.sentinels)}/${encodeURIComponent(target.name)}/${target.db}`;
    case 'cluster':
      return `redis+cluster://${hosts(target.nodes)}`;
  }
}

function parseCredentials(userinfo: string, fail: (problem: string) => never): Credentials {
  const colon = userinfo.indexOf(':');
  const username = decode(colon === -1 ? userinfo : userinfo.slice(0, colon), fail);
  const password = colon === -1 ? '' : decode(userinfo.slice(colon + 1), fail);
  return { ...(username ? { username } : {}), ...(password ? { password } : {}) };
}

function parseHost(entry: string, defaultPort: number, fail: (problem: string) => never): HostPort {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+))(?::(\d{1,5}))?$/.exec(entry);
  // The entry is not repeated: with an unencoded '/' or '@' in a password, it could hold part of it.
  if (!match) return fail('has a malformed host (host, host:port or [ipv6]:port, comma-separated where several are allowed)');
  const port = match[3] === undefined ? defaultPort : Number(match[3]);
  if (port < 1 || port > 65535) fail('has a port out of range (1-65535)');
  return { host: match[1] ?? match[2]!, port };
}

function parseDb(path: string, fail: (problem: string) => never): number {
  if (path === '') return 0;
  if (!/^\d{1,5}$/.test(path)) fail('has a path that is not a database number (/0, /1, ...)');
  return Number(path);
}

function decode(value: string, fail: (problem: string) => never): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return fail('has a malformed percent-encoding in its credentials or master name');
  }
}
