import { createServer, request as httpRequest, type Server } from 'node:http';

/** A proxy in front of anvil that answers the next eth_sendRawTransaction with a node error of our choosing. */
export interface Inject { sendError?: string; swallow?: number; hang?: number; ahead?: number }
export async function injectingProxy(target: string, state: Inject): Promise<{ url: string; close(): Promise<void> }> {
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const call = JSON.parse(body.toString()) as { id?: unknown; method?: string };
      if (call.method === 'eth_sendRawTransaction' && state.sendError) {
        const message = state.sendError;
        state.sendError = undefined;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32000, message } }));
        return;
      }
      if (call.method === 'eth_getTransactionCount' && state.ahead) {
        state.ahead--;
        const up = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers: { ...req.headers, 'content-length': String(body.length) } }, (r) => {
          const got: Buffer[] = [];
          r.on('data', (c: Buffer) => got.push(c));
          r.on('end', () => {
            const ans = JSON.parse(Buffer.concat(got).toString()) as { result: string };
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ ...ans, result: `0x${(BigInt(ans.result) + 1n).toString(16)}` }));
          });
        });
        up.end(body);
        return;
      }
      if (call.method === 'eth_sendRawTransaction' && state.hang) {
        state.hang--;
        return; // never answered, never forwarded
      }
      if (call.method === 'eth_sendRawTransaction' && state.swallow) {
        state.swallow--;
        // forwarded to the node, but the answer is lost
        const up = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers: { ...req.headers, 'content-length': String(body.length) } }, (r) => r.resume());
        up.end(body);
        return;
      }
      const upstream = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers: { ...req.headers, 'content-length': String(body.length) } }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      upstream.end(body);
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  return { url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}
