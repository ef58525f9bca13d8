import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A port that was free on 127.0.0.1 a moment ago, for a server started afterwards (PostgreSQL, Redis, a gateway whose
 * public URL must name its port before it listens).
 *
 * Not the port the OS picks for `listen(0)`: that comes from the ephemeral range, the same range every outgoing
 * connection's local port comes from, so between this answer and the server's bind a client connection (to
 * PostgreSQL, to a fake provider) can take it; a test failed so with EADDRINUSE. A random port below that range is
 * taken only by another explicit bind, and is checked free here first.
 */
export async function freePort(): Promise<number> {
  const [low] = ephemeralRange();
  const floor = 10_000;
  if (low - floor >= 1_000) {
    for (let attempt = 0; attempt < 20; attempt++) {
      const candidate = floor + Math.floor(Math.random() * (low - floor));
      if (await canListen(candidate)) return candidate;
    }
  }
  return listenAndRelease(0);
}

/** The kernel's range for outgoing connections' local ports; Linux's default where it cannot be read. */
function ephemeralRange(): [number, number] {
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
