import { lookup } from 'node:dns/promises';
import { request } from 'node:https';
import { BlockList, isIP } from 'node:net';

/**
 * The one way the service fetches a URL someone else chose (a client's metadata document, a
 * client's keys): a GET that cannot be turned against the network the service runs in.
 *
 * - https only, no user name or password in the URL;
 * - the host is resolved once, and refused when any of its addresses is loopback, private,
 *   link-local, CGNAT, multicast, unique-local, reserved, or IPv4-mapped,
 *   unless its `host:port` is one the operator trusts (`trustedHosts`);
 * - the connection is made to the address that was checked (TLS still checks the certificate
 *   against the name), so a second lookup cannot answer differently (DNS rebinding);
 * - redirects are not followed (a 3xx is returned as it is), no cookie or credential is sent;
 * - the whole exchange has a deadline, and a body larger than `maxBytes` is refused.
 */
export interface SafeFetchOptions {
  /** `host:port` (as a URL's `host`, port included) that may resolve to a private or loopback address. */
  trustedHosts: readonly string[];
  /** Milliseconds for the whole exchange: resolving, connecting, and reading the body. */
  timeoutMs: number;
  /** Bytes at most in the body. */
  maxBytes: number;
}

/** A GET of `url` with these request headers; the answer as a web Response (body read whole). */
export type SafeFetch = (url: string, init?: { headers?: Record<string, string> }) => Promise<Response>;

/** A fetch the rules refused, or that failed: the message says which, never more than the URL's host. */
export class SafeFetchError extends Error {
  override name = 'SafeFetchError';
  /**
   * What whoever chose the URL may be told: the message, less what only the service's own network
   * knows (the address a name resolved to there). The log keeps the message.
   */
  readonly told: string;

  constructor(message: string, options?: ErrorOptions & { told?: string }) {
    super(message, options);
    this.told = options?.told ?? message;
  }
}

export function safeFetch({ trustedHosts, timeoutMs, maxBytes }: SafeFetchOptions): SafeFetch {
  const trusted = new Set(trustedHosts);
  return async (target, init = {}) => {
    const url = URL.parse(target);
    if (!url || url.protocol !== 'https:') throw new SafeFetchError('only https URLs are fetched');
    if (url.username || url.password) throw new SafeFetchError('a URL with a user name or password is not fetched');
    const port = Number(url.port || 443);
    const hostname = url.hostname.replace(/^\[|\]$/g, '');
    const signal = AbortSignal.timeout(timeoutMs);
    const addresses = await resolve(hostname, signal);
    if (!trusted.has(`${url.hostname}:${port}`)) {
      const special = addresses.find(({ address }) => isSpecialUse(address));
      if (special) {
        throw new SafeFetchError(`${url.host} resolves to a non-public address (${special.address}), which is not fetched`, {
          told: `${url.host} resolves to a non-public address, which is not fetched`,
        });
      }
    }
    return get(url, addresses[0]!, hostname, port, init.headers ?? {}, signal, maxBytes);
  };
}

async function resolve(hostname: string, signal: AbortSignal): Promise<Array<{ address: string; family: number }>> {
  const family = isIP(hostname);
  if (family) return [{ address: hostname, family }];
  try {
    const found = await Promise.race([
      lookup(hostname, { all: true, order: 'ipv4first' }),
      new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
    ]);
    if (found.length === 0) throw new SafeFetchError(`${hostname} has no address`);
    return found;
  } catch (error) {
    if (error instanceof SafeFetchError) throw error;
    throw new SafeFetchError(`${hostname} could not be resolved`, { cause: error });
  }
}

function get(url: URL, pinned: { address: string; family: number }, hostname: string, port: number, headers: Record<string, string>, signal: AbortSignal, maxBytes: number): Promise<Response> {
  return new Promise((resolvePromise, reject) => {
    const fail = (error: unknown) => reject(error instanceof SafeFetchError ? error : new SafeFetchError(`${url.host} could not be fetched`, { cause: error }));
    const outgoing = request({
      host: pinned.address,
      family: pinned.family,
      port,
      // The name, not the address: the server picks its certificate by it, and it is what the certificate must name.
      servername: isIP(hostname) ? undefined : hostname,
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      headers: { ...headers, host: url.host, 'user-agent': 'workspace-oauth-server' },
      agent: false,
      signal,
    }, (incoming) => {
      const declared = Number(incoming.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) {
        incoming.destroy();
        fail(new SafeFetchError(`${url.host} answered more than ${maxBytes} bytes`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      incoming.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) {
          incoming.destroy(new SafeFetchError(`${url.host} answered more than ${maxBytes} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      incoming.on('error', fail);
      incoming.on('end', () => {
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(incoming.headers)) {
          if (value !== undefined && name !== 'set-cookie') responseHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
        }
        const status = incoming.statusCode ?? 502;
        const body = status === 204 || status === 304 ? null : Buffer.concat(chunks, size);
        resolvePromise(new Response(body, { status, headers: responseHeaders }));
      });
    });
    outgoing.on('error', (error) => fail(signal.aborted ? new SafeFetchError(`${url.host} did not answer within the time allowed`) : error));
    outgoing.end();
  });
}

/**
 * Addresses no fetch on someone else's say-so may reach (IANA special-purpose registries, the
 * blocks the engine's own fetcher refuses and more): "this network", private, CGNAT, loopback,
 * link-local, the IETF and documentation blocks, AS112 and AMT, 6to4 relays, benchmarking,
 * multicast and reserved; IPv6 unspecified, loopback, the IPv4-mapped, -compatible and translated
 * blocks, discard and the dummy prefix, Teredo and ORCHID, documentation (both), 6to4, AS112,
 * SRv6, unique-local, link-local, site-local and multicast. Two lists: a BlockList holding IPv6 rules
 * checks an IPv4 address as its IPv4-mapped form, which the IPv6 rules refuse.
 */
const SPECIAL_USE_IPV4 = blockList('ipv4', [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.31.196.0', 24], ['192.52.193.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16],
  ['192.175.48.0', 24], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
]);
const SPECIAL_USE_IPV6 = blockList('ipv6', [
  ['::', 96], ['::1', 128], ['::ffff:0:0', 96], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['100:0:0:1::', 64],
  ['2001::', 23], ['2001:db8::', 32], ['2002::', 16], ['2620:4f:8000::', 48], ['3fff::', 20], ['5f00::', 16],
  ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
]);

function blockList(family: 'ipv4' | 'ipv6', networks: ReadonlyArray<readonly [string, number]>): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of networks) list.addSubnet(network, prefix, family);
  return list;
}

/**
 * Whether an address is one of the special-use ones. Every IPv4-mapped address (`::ffff:a.b.c.d`,
 * however it is spelled) is: a public host has no reason to publish one, and refusing the whole
 * block leaves no spelling of a private IPv4 address to get through.
 */
export function isSpecialUse(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return SPECIAL_USE_IPV4.check(address, 'ipv4');
  return family !== 6 || SPECIAL_USE_IPV6.check(address, 'ipv6');
}
