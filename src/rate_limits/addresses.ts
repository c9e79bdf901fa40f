import { BlockList, isIPv4, isIPv6, SocketAddress } from 'node:net';

/** IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, RFC 4291 section 2.5.5.2): an IPv4 client on a dual-stack socket. */
const IPV4_MAPPED = new BlockList();
IPV4_MAPPED.addSubnet('::ffff:0:0', 96, 'ipv6');

/**
 * The key a per-address limit counts a client address under (Koa's `ctx.ip`: the socket's peer,
 * or the X-Forwarded-For entry TRUST_PROXY says to believe).
 *
 * - An IPv4 address is itself; an IPv4-mapped IPv6 address is the IPv4 address it maps, so a
 *   client counts the same whether it came in over IPv4 or a dual-stack socket.
 * - An IPv6 address is its network of `ipv6Prefix` bits (RATE_LIMIT_IPV6_PREFIX, 64 by default):
 *   one subscriber is routed a whole /64 (often a /56 or /48) and may send each request from
 *   another of its 2^64 addresses, so counting single IPv6 addresses would count nothing.
 * - An address with a port (`[2001:db8::1]:443`, `192.0.2.1:80`, as some proxies write
 *   X-Forwarded-For) or an IPv6 zone (`fe80::1%eth0`) is read without it.
 * - Anything else (no proxy should send it) is a key of its own, as it was.
 */
export function addressKey(ip: string, ipv6Prefix: number): string {
  const address = hostOf(ip);
  if (address === undefined) return ip;
  if (isIPv4(address)) return address;
  if (IPV4_MAPPED.check(address, 'ipv6')) return mappedIPv4(address);
  return `${network(address, ipv6Prefix)}/${ipv6Prefix}`;
}

/** The address alone: without a port, brackets or an IPv6 zone; undefined when it is not an IP address. */
function hostOf(ip: string): string | undefined {
  const unzoned = ip.replace(/%.*$/, '');
  if (isIPv4(unzoned) || isIPv6(unzoned)) return unzoned;
  return SocketAddress.parse(ip)?.address;
}

/** An IPv6 address's eight 16-bit groups. */
function groups(address: string): number[] {
  // The URL parser writes any valid IPv6 address canonically: lower case, a trailing dotted IPv4
  // part as two hex groups, at most one `::`; only the `::` is left to expand.
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const [head = '', tail] = canonical.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16)));
  const [first, last] = [parse(head), tail === undefined ? [] : parse(tail)];
  return [...first, ...Array<number>(8 - first.length - last.length).fill(0), ...last];
}

function mappedIPv4(address: string): string {
  const [, , , , , , high = 0, low = 0] = groups(address);
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

/** The address with every bit after the first `prefix` cleared, written canonically. */
function network(address: string, prefix: number): string {
  const masked = groups(address).map((group, index) => {
    const kept = Math.min(16, Math.max(0, prefix - index * 16));
    return kept === 0 ? 0 : group & (0xffff << (16 - kept)) & 0xffff;
  });
  return new SocketAddress({ address: masked.map((group) => group.toString(16)).join(':'), family: 'ipv6' }).address;
}
