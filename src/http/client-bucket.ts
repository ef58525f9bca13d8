import { isIPv6 } from 'node:net';

/**
 * The unit per-address limits count a client by: an IPv4 address, or an IPv6 address's /64. One
 * IPv6 client (a home line, a VPS) is routed a whole /64, so counting each address would give it
 * 2^64 budgets. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) counts as its IPv4 address.
 */
export function clientBucket(ip: string | undefined): string {
  // Node leaves the address undefined once the client has disconnected; such requests share one
  // bucket (their answer reaches nobody).
  if (!ip) return 'gone';
  const address = ip.replace(/%.*$/, ''); // a zone id (fe80::1%eth0) is not part of the address
  if (!isIPv6(address)) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = address.split('::');
  const groups = head ? head.split(':') : [];
  if (tail !== undefined) {
    const rest = tail ? tail.split(':') : [];
    groups.push(...Array<string>(Math.max(0, 8 - groups.length - rest.length)).fill('0'), ...rest);
  }
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
