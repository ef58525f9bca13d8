import { spawn } from 'node:child_process';
import type { Server as HttpServer } from 'node:http';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import type { Logger } from 'pino';

/**
 * More than one accept per event-loop turn on the API's listening socket.
 *
 * Since libuv 1.45 (Node 20) a listening socket accepts ONE connection per turn of the event loop
 * (libuv pull request 3696), relying on the socket being reported readable again next turn. A busy
 * gateway's turn takes 5–10 ms (every stream's chunks are handled in it), so it accepts 100–200
 * connections a second, and a burst of new client connections (a client's pool growing as soon as
 * answers slow down) waits in the kernel's accept queue: measured at 1,000 streams/s, up to 231
 * queued, the slowest 1% of first tokens 1–3 s late, all of them on new connections, while the
 * gateway itself took under 0.2 s for each (bench/README.md, "New connections wait for the loop").
 *
 * The kernel reports each file descriptor of a listening socket separately, and libuv accepts one
 * connection per descriptor per turn. So the gateway keeps `count` more descriptors of the same
 * listening socket (copies, not new sockets: one queue, one port, one address), each watched by a
 * plain net.Server that hands what it accepts to the HTTP server as Node's own accept would
 * (`'connection'`, http.Server's documented way in). Node cannot duplicate a descriptor itself, so
 * a short-lived helper process is sent the socket's handle over IPC and sends it back `count`
 * times: each receipt is a new descriptor in this process (SCM_RIGHTS). The helper never listens
 * on it and exits at once; its copy closes with it.
 *
 * Best effort: if the helper cannot be started or answers late, the gateway serves with its one
 * descriptor, as before, and says so in the log.
 */
export interface AcceptWatchers {
  /** How many copies are being watched (0 when none could be made). */
  readonly count: number;
  /** Connections the copies accepted so far (the rest were accepted on the original descriptor). */
  readonly accepted: number;
  /** Stops accepting on every copy (the original is closed by the HTTP server's own close). */
  close(): void;
}

const HELPER_TIMEOUT_MS = 5_000;

/**
 * The helper: receives a raw handle, sends it back as many times as asked, then leaves. Each
 * handle message waits for the receiver's acknowledgement (Node's IPC sends one handle at a time),
 * so the last send's callback means every copy was delivered.
 */
const HELPER_SOURCE = `
process.on('message', (m, handle) => {
  let left = m.copies;
  const next = (err) => {
    if (err || left-- === 0) return process.disconnect();
    process.send('copy', handle, next);
  };
  next();
});`;

export async function addAcceptWatchers(
  server: HttpServer,
  count: number,
  logger: Logger,
  // The node binary the helper runs on (a test points it at one that does not exist).
  opts: { execPath?: string } = {},
): Promise<AcceptWatchers> {
  const none: AcceptWatchers = { count: 0, accepted: 0, close() {} };
  // The listening socket's libuv handle: Node's IPC sends a raw handle as is, where a net.Server
  // would be made to listen in the helper (and accept connections there) on arrival.
  const handle = (server as unknown as { _handle?: object })._handle;
  if (count <= 0 || !handle) return none;
  const copies: NetServer[] = [];
  let accepted = 0;
  // The options net.Server applies to each socket it accepts, kept as fields (http.Server's: half-open
  // allowed, no Nagle delay, no TCP keep-alive; the keep-alive delay is kept in seconds, given in
  // milliseconds), so a socket accepted by a copy is the same as one the server accepts itself.
  const fields = server as unknown as {
    allowHalfOpen?: boolean;
    highWaterMark?: number;
    noDelay?: boolean;
    keepAlive?: boolean;
    keepAliveInitialDelay?: number;
  };
  const socketOptions = {
    allowHalfOpen: fields.allowHalfOpen ?? true,
    highWaterMark: fields.highWaterMark,
    noDelay: fields.noDelay ?? true,
    keepAlive: fields.keepAlive ?? false,
    keepAliveInitialDelay: (fields.keepAliveInitialDelay ?? 0) * 1000,
  };
  const adopt = (raw: unknown) => {
    const copy = createServer(socketOptions);
    copy.on('connection', (socket) => {
      accepted++;
      countOnServer(socket, copy, server);
      server.emit('connection', socket);
    });
    copy.on('error', (err) => logger.warn({ err: err.message }, 'a copy of the API listening socket failed; the others still accept'));
    // listen() on a handle already listening: the kernel keeps its queue, libuv starts watching
    // this descriptor.
    copy.listen(raw as Parameters<NetServer['listen']>[0]);
    copies.push(copy);
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const helper = spawn(opts.execPath ?? process.execPath, ['-e', HELPER_SOURCE], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], env: {} });
      let waiting = true;
      const timer = setTimeout(() => {
        helper.kill('SIGKILL');
        done(new Error(`the helper did not answer within ${HELPER_TIMEOUT_MS} ms`));
      }, HELPER_TIMEOUT_MS);
      const done = (err?: Error) => {
        waiting = false;
        clearTimeout(timer);
        // Nothing more is taken once the wait is over: a copy adopted after it would be watched by a
        // net.Server that close() never reaches, holding the port after the stop. (A helper that never
        // started, no pid, has no channel to close.)
        if (helper.connected && helper.pid !== undefined) helper.disconnect();
        if (err) reject(err);
        else resolve();
      };
      helper.on('message', (_m, raw) => {
        if (raw && waiting) adopt(raw);
        else (raw as { close?: () => void } | undefined)?.close?.();
      });
      helper.once('error', (err) => done(err));
      // A helper that could not run (a node that refuses `-e`, a crash) exits having sent fewer
      // copies: the operator is told, as when it cannot start.
      helper.once('exit', (code, signal) =>
        done(
          copies.length < count ? new Error(`the helper exited (${signal ?? `code ${code}`}) after sending ${copies.length} of ${count} copies`) : undefined,
        ),
      );
      helper.send({ copies: count }, handle as Parameters<typeof helper.send>[1]);
    });
  } catch (err) {
    logger.warn({ err: (err as Error).message, made: copies.length }, 'could not copy the API listening socket; accepting one connection per event-loop turn');
  }
  if (copies.length === 0) return none;
  return {
    count: copies.length,
    get accepted() {
      return accepted;
    },
    close() {
      for (const copy of copies) copy.close();
    },
  };
}

/**
 * net.Server counts the sockets it accepted (`_connections`, which `getConnections()` reads) and
 * emits 'close' only when its handle is closed and that count is 0; a socket, when destroyed,
 * takes itself off the count of `socket._server`. A socket a copy accepted is moved onto the HTTP
 * server's count, as if the server had accepted it: so the server's close (Fastify's, and with it
 * the graceful stop) still waits for every connection, whichever descriptor accepted it.
 */
function countOnServer(socket: Socket, copy: NetServer, server: HttpServer): void {
  const counted = socket as unknown as { _server: unknown };
  const from = copy as unknown as { _connections: number };
  const to = server as unknown as { _connections: number };
  from._connections--;
  to._connections++;
  counted._server = server;
}
