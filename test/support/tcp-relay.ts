import { createConnection, createServer, type Socket } from 'node:net';
import { freePort } from '../../src/devchain/ports.ts';

/**
 * A TCP relay on 127.0.0.1 to a server that is already running, which a test opens and closes to
 * make that server reachable or not at a fixed address: a dependency that is down when a gateway
 * starts and comes up later, without restarting the server behind it (a deployed chain, say).
 */
export interface TcpRelay {
  port: number;
  /** Starts listening and relaying. */
  open(): Promise<void>;
  /** Stops listening and cuts every relayed connection (the address refuses again). */
  close(): Promise<void>;
}

/** A relay to `targetPort`, closed until `open`. */
export async function tcpRelay(targetPort: number): Promise<TcpRelay> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  return {
    port,
    open: () => new Promise((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', () => resolve())),
    close: () =>
      new Promise((resolve) => {
        if (!server.listening) return resolve();
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
