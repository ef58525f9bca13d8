import { createServer, request as httpRequest, type Server } from 'node:http';

/** A pass-through HTTP proxy that counts requests by path, to see how often a client tried. */
export async function countingProxy(target: string): Promise<{ url: string; count(path: string): number; close(): Promise<void> }> {
  const seen: string[] = [];
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    seen.push((req.url ?? '').split('?')[0]!);
    const upstream = httpRequest({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: { ...req.headers, host: to.host } }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    count: (path) => seen.filter((p) => p === path).length,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
