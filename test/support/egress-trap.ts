import { createServer, type Server } from 'node:http';

/**
 * Where a client run as a child process tries to go beyond 127.0.0.1: give its URL as HTTPS_PROXY and
 * HTTP_PROXY (with NO_PROXY=127.0.0.1,localhost), and every attempt is refused and recorded.
 */
/** An HTTP proxy that answers every request and CONNECT with 403 and records where it was meant to go. */
export async function egressTrap(): Promise<{ url: string; connects: string[]; close(): Promise<void> }> {
  const connects: string[] = [];
  const server: Server = createServer((req, res) => {
    connects.push(`${req.method} ${req.url}`);
    res.writeHead(403).end();
  });
  server.on('connect', (req, socket) => {
    connects.push(`CONNECT ${req.url}`);
    socket.on('error', () => {});
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    connects,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
