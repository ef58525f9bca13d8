import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A port that was free on 127.0.0.1 a moment ago, for a server started afterwards (PostgreSQL, Redis, a gateway whose
 * public URL must name its port before it listens).
 *
 * Not the port the OS picks for `listen(0)`: that comes from the ephemeral range, the same range every outgoing
 * connection's local port comes from, so between this answer and the server's bind a client connection (to
 * PostgreSQL, to a fake provider) can take it; a test failed so with EADDRINUSE. A random port below that range is
 * taken only by another explicit bind, and is checked free here first. (A port above the range does as well.)
 */
export async function freePort(): Promise<number> {
  const spans = portsOutside(ephemeralRange());
  const size = spans.reduce((n, [from, to]) => n + to - from + 1, 0);
  for (let attempt = 0; size > 0 && attempt < 20; attempt++) {
    let at = Math.floor(Math.random() * size);
    for (const [from, to] of spans) {
      if (at <= to - from) {
        if (await canListen(from + at)) return from + at;
        break;
      }
      at -= to - from + 1;
    }
  }
  // A kernel that lends out nearly every port: its own pick, as before.
  return listenAndRelease(0);
}

/**
 * The spans of ports outside the ephemeral range, at least 1,000 ports each: from 10,000 (below it sit well-known
 * services' ports) where that leaves room, else from 1,024.
 */
export function portsOutside([low, high]: [number, number]): [number, number][] {
  const spansFrom = (floor: number): [number, number][] =>
    (
      [
        [floor, Math.min(low - 1, 65_535)],
        [Math.max(high + 1, floor), 65_535],
      ] as [number, number][]
    ).filter(([from, to]) => to - from + 1 >= 1_000);
  const preferred = spansFrom(10_000);
  return preferred.length ? preferred : spansFrom(1_024);
}

/** The kernel's range for outgoing connections' local ports; Linux's default where it cannot be read. */
export function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high)) return [low!, high!];
  } catch {
    // Not Linux, or /proc not mounted.
  }
  return [32_768, 60_999];
}

async function canListen(port: number): Promise<boolean> {
  try {
    await listenAndRelease(port);
    return true;
  } catch {
    return false;
  }
}

function listenAndRelease(port: number): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(port, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolvePort(addr.port) : reject(new Error('no port'))));
    });
  });
}
