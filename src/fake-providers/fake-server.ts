import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** A fake provider's listening server: its origin, and a close that cuts open connections. */
export interface FakeServer {
  origin: string;
  close(): Promise<void>;
}

/**
 * An HTTP server on 127.0.0.1 (a free port) for the fake providers. Each request's body is read
 * whole and parsed as JSON, or handed over as its text when it is not JSON. `close` destroys the
 * open sockets first, so a hanging or streaming answer cannot hold a test's after() hook.
 */
export async function startFakeServer(handle: (req: IncomingMessage, res: ServerResponse, body: any) => void): Promise<FakeServer> {
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => {
      let body: any;
      try {
        body = JSON.parse(raw || '{}');
      } catch {
        body = raw;
      }
      handle(req, res, body);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
