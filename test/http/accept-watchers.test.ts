import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import { addAcceptWatchers } from '../../src/http/accept-watchers.ts';
import { captureLogger } from '../support/capture-logger.ts';
import { startTestGateway } from '../support/gateway.ts';
import { okServer } from '../support/ok-server.ts';

const BURST = 64;

/**
 * Holds this process's event loop (a synchronous child run) while another process opens `count`
 * connections, so they all wait in the kernel's accept queue; then counts the event-loop turns
 * (check phases) until the server has seen every one.
 */
async function turnsToAcceptBurst(server: Server, port: number, count: number): Promise<number> {
  let seen = 0;
  server.on('connection', () => seen++);
  const connector = `const net = require('node:net'); let open = 0;
    for (let i = 0; i < ${count}; i++) net.connect(${port}, '127.0.0.1', () => { if (++open === ${count}) process.exit(0); });`;
  execFileSync(process.execPath, ['-e', connector], { stdio: 'ignore', timeout: 20_000 });
  let turns = 0;
  await new Promise<void>((resolve) => {
    const turn = () => {
      if (seen >= count) return resolve();
      turns++;
      setImmediate(turn);
    };
    setImmediate(turn);
  });
  return turns;
}

describe('accept watchers: more than one new connection per event-loop turn', () => {
  /**
   * A server with `copies` copies of its listening socket: the turns it takes to accept a queued
   * burst, and the distinct settings of the sockets it was handed (half-open, buffer sizes, the
   * client's address that per-IP limits key on).
   */
  async function burstTurns(copies: number): Promise<{ turns: number; socketSettings: Set<string> }> {
    const { server, port } = await okServer();
    const watchers = await addAcceptWatchers(server, copies, captureLogger().logger);
    const socketSettings = new Set<string>();
    server.on('connection', (s: Socket) =>
      socketSettings.add(JSON.stringify([s.allowHalfOpen, s.readableHighWaterMark, s.writableHighWaterMark, s.remoteAddress])),
    );
    try {
      assert.equal(watchers.count, copies);
      const turns = await turnsToAcceptBurst(server, port, BURST);
      if (copies > 0) assert.ok(watchers.accepted > 0, 'the copies accepted some of the burst');
      return { turns, socketSettings };
    } finally {
      watchers.close();
      server.close();
      server.closeAllConnections();
    }
  }

  test('the runtime accepts one connection per turn on one descriptor (why the copies exist)', async () => {
    const { turns } = await burstTurns(0);
    // If a future Node accepts a queue in one turn again, this fails and the copies can go.
    assert.ok(turns >= BURST * 0.75, `${BURST} queued connections were accepted in ${turns} turns`);
  });

  test('with 8 copies of the listening socket, a burst is taken in about a ninth of the turns', async () => {
    const { turns } = await burstTurns(8);
    assert.ok(turns <= BURST / 9 + 6, `${BURST} queued connections were accepted in ${turns} turns`);
  });

  test('a socket a copy accepted has the settings and the client address of one the server accepted itself', async () => {
    const own = await burstTurns(0);
    const withCopies = await burstTurns(8);
    assert.equal(own.socketSettings.size, 1);
    assert.deepEqual([...withCopies.socketSettings], [...own.socketSettings]);
  });

  test('after close, neither the socket nor any copy accepts: the port refuses connections', async () => {
    const { server, port } = await okServer();
    const { logger } = captureLogger();
    const watchers = await addAcceptWatchers(server, 4, logger);
    watchers.close();
    await new Promise((resolve) => server.close(resolve));
    const refused = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve('connected');
      });
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    assert.equal(refused, 'ECONNREFUSED');
  });

  test("a request in flight on a connection a copy accepted holds the server's close until it is answered", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let requests = 0;
    const server = createServer((_req, res) => {
      requests++;
      void released.then(() => res.end('done'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const watchers = await addAcceptWatchers(server, 8, captureLogger().logger);
    // Another process opens BURST connections, one request on each, and reads every answer.
    const client = spawn(
      process.execPath,
      [
        '-e',
        `const net = require('node:net'); let answered = 0;
        for (let i = 0; i < ${BURST}; i++) {
          const s = net.connect(${port}, '127.0.0.1', () => s.write('GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'));
          let text = ''; s.on('data', (b) => (text += b)); s.on('end', () => { if (text.endsWith('done') && ++answered === ${BURST}) process.exit(0); });
        }`,
      ],
      { stdio: 'ignore' },
    );
    const clientExit = new Promise<number | null>((resolve) => client.once('exit', resolve));
    try {
      while (requests < BURST) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(watchers.accepted > 0, 'some connections were accepted by the copies');
      // The server counts every connection, whichever descriptor accepted it: its close waits on this count.
      const counted = await new Promise<number>((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
      assert.equal(counted, BURST);
      let closed = false;
      watchers.close();
      server.close(() => (closed = true));
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(closed, false, `the server closed with ${BURST} requests unanswered (${watchers.accepted} on copies)`);
      release();
      assert.equal(await clientExit, 0, 'every request was answered');
      while (!closed) await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      release();
      client.kill();
      watchers.close();
      server.close();
      server.closeAllConnections();
    }
  });

  test('0 copies: nothing is started, the server keeps its one descriptor', async () => {
    const { server } = await okServer();
    const { logger, lines } = captureLogger();
    try {
      const watchers = await addAcceptWatchers(server, 0, logger);
      assert.equal(watchers.count, 0);
      assert.equal(lines.length, 0);
    } finally {
      server.close();
    }
  });

  test('a helper that cannot start: a warning, no copies, the server still serves', async () => {
    const { server, port } = await okServer();
    const { logger, lines } = captureLogger();
    try {
      const watchers = await addAcceptWatchers(server, 8, logger, { execPath: '/nonexistent/node' });
      assert.equal(watchers.count, 0);
      assert.match(lines.join(''), /could not copy the API listening socket/);
      const res = await fetch(`http://127.0.0.1:${port}/`);
      assert.equal(await res.text(), 'ok');
    } finally {
      server.close();
      server.closeAllConnections();
    }
  });

  test('the gateway: 64 requests on 64 new connections at once are all answered; after stop the port refuses', async () => {
    const gw = await startTestGateway({ engine: 'sqlite' });
    let stopped = false;
    try {
      assert.equal(gw.config.server.acceptCopies, 8);
      const { port } = new URL(gw.url);
      const answers = await Promise.all(
        Array.from(
          { length: BURST },
          () =>
            new Promise<string>((resolve, reject) => {
              const socket = connect(Number(port), '127.0.0.1', () => socket.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
              let text = '';
              socket.on('data', (b) => (text += b.toString()));
              socket.once('end', () => resolve(text.split('\r\n')[0]!));
              socket.once('error', reject);
            }),
        ),
      );
      assert.deepEqual(new Set(answers), new Set(['HTTP/1.1 200 OK']));
      await gw.stop();
      stopped = true;
      await assert.rejects(fetch(`${gw.url}/health`));
    } finally {
      if (!stopped) await gw.stop();
    }
  });
});
