import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A plain HTTP server answering `ok` to everything, listening on 127.0.0.1 and a free port. */
export async function okServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}
