import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import { startTestGateway } from '../support/gateway.ts';
import { until } from '../support/until.ts';

const CONNECTIONS = 64;

/**
 * Counts the connections a copy of the listening socket accepted: before the HTTP server's own
 * listener runs, `socket.server` is still the net.Server that accepted it.
 */
function countCopyAccepted(server: Server): { total: number; onCopies: number } {
  const counts = { total: 0, onCopies: 0 };
  server.prependListener('connection', (socket: Socket & { server?: unknown }) => {
    counts.total++;
    if (socket.server !== server) counts.onCopies++;
  });
  return counts;
}

/**
 * Opens `count` connections while this process's loop (the gateway's too) is held, so they wait
 * in the kernel's accept queue and the gateway takes them on all its descriptors at once.
 */
function queuedConnections(port: number, count: number): { sockets: Socket[]; closed: Promise<void>[] } {
  const sockets = Array.from({ length: count }, () => connect(port, '127.0.0.1'));
  const closed = sockets.map((s) => new Promise<void>((resolve) => s.once('close', () => resolve())));
  for (const s of sockets) s.on('error', () => {});
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
  return { sockets, closed };
}

function isClosed(s: Socket): boolean {
  return s.destroyed || s.readyState === 'closed';
}

describe('attack: connections accepted by the copies of the listening socket', () => {
  test('the grace runs out: connections a copy accepted, stalled mid-headers, are cut by the stop', async () => {
    // Headers may take a minute here: only the stop's own cut can close these sockets in time.
    const gw = await startTestGateway({ engine: 'sqlite', config: { server: { headersTimeoutSeconds: 60, requestTimeoutSeconds: 60 } } });
    const counts = countCopyAccepted(gw.app.server);
    const { sockets, closed } = queuedConnections(Number(new URL(gw.url).port), CONNECTIONS);
    try {
      await until(() => counts.total === CONNECTIONS, 'the gateway accepted every connection');
      assert.ok(counts.onCopies > 0, 'some connections were accepted by the copies');
      // A request begun and never finished: not idle, so the server's close alone does not end it.
      for (const s of sockets) s.write('GET /health HTTP/1.1\r\nHost: x\r\n');
      await new Promise((resolve) => setTimeout(resolve, 100));
      await gw.stop({ graceMs: 300 });
      await Promise.race([Promise.all(closed), new Promise((resolve) => setTimeout(resolve, 3_000))]);
      const open = sockets.filter((s) => !isClosed(s)).length;
      assert.equal(open, 0, `${open} of ${CONNECTIONS} stalled connections (${counts.onCopies} accepted by copies) outlived the stop`);
    } finally {
      for (const s of sockets) s.destroy();
      await gw.stop();
    }
  });

  test('slowloris on connections a copy accepted: headersTimeout closes every one', async () => {
    const gw = await startTestGateway({ engine: 'sqlite', config: { server: { headersTimeoutSeconds: 1, requestTimeoutSeconds: 2 } } });
    const counts = countCopyAccepted(gw.app.server);
    const { sockets, closed } = queuedConnections(Number(new URL(gw.url).port), CONNECTIONS);
    const head = `GET /health HTTP/1.1\r\nHost: x\r\nX-Padding: ${'p'.repeat(200)}\r\n\r\n`;
    let sent = 0;
    // One byte every 200 ms: the head would take 50 s; headersTimeout is 1 s.
    const dribble = setInterval(() => {
      for (const s of sockets) if (!isClosed(s) && sent < head.length) s.write(head[sent]!);
      sent++;
    }, 200);
    try {
      await until(() => counts.total === CONNECTIONS, 'the gateway accepted every connection');
      assert.ok(counts.onCopies > 0, 'some connections were accepted by the copies');
      // Generous bound (1 s timeout, checked every 250 ms): a socket the server does not sweep lives 50 s.
      await Promise.race([Promise.all(closed), new Promise((resolve) => setTimeout(resolve, 10_000))]);
      const open = sockets.filter((s) => !isClosed(s)).length;
      assert.equal(open, 0, `${open} of ${CONNECTIONS} dribbling sockets (${counts.onCopies} accepted by copies) were not closed by headersTimeout`);
    } finally {
      clearInterval(dribble);
      for (const s of sockets) s.destroy();
      await gw.stop();
    }
  });

  test('a flood of pipelining connections: every request on every connection is answered', async () => {
    const gw = await startTestGateway({ engine: 'sqlite' });
    const counts = countCopyAccepted(gw.app.server);
    const { sockets, closed } = queuedConnections(Number(new URL(gw.url).port), CONNECTIONS);
    try {
      const received = sockets.map((s) => {
        let text = '';
        s.on('data', (b: Buffer) => (text += b.toString()));
        return () => text;
      });
      // Three requests in one write; the last asks for the close, so each socket ends when all are answered.
      const one = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
      for (const s of sockets) s.write(`${one}${one}GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      await Promise.race([Promise.all(closed), new Promise((resolve) => setTimeout(resolve, 10_000))]);
      assert.ok(counts.onCopies > 0, 'some connections were accepted by the copies');
      const answered = received.map((text) => text().match(/HTTP\/1\.1 200 OK\r\n/g)?.length ?? 0);
      assert.deepEqual(new Set(answered), new Set([3]), `answers per connection: ${answered.join(',')}`);
    } finally {
      for (const s of sockets) s.destroy();
      await gw.stop();
    }
  });
});
