import { createServer, request as httpRequest, type Server } from 'node:http';

/**
 * A JSON-RPC proxy in front of anvil that a test can turn into a bad RPC endpoint: cut (`up` false:
 * connections dropped, as a dead RPC does), or lagging (`staleNonceReads` > 0: that many
 * `eth_getTransactionCount` calls are answered as of the genesis block, as a load-balanced endpoint
 * whose node is behind answers them; the node then refuses the transaction built on it).
 */
export interface RpcProxyState {
  up: boolean;
  staleNonceReads?: number;
}

export async function rpcProxy(target: string, state: RpcProxyState): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const to = new URL(target);
  const server = createServer((req, res) => {
    if (!state.up) {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = lagNonceRead(Buffer.concat(chunks), state);
      const headers = { ...req.headers, 'content-length': String(body.length) };
      const upstream = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers }, (r) => {
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
  return {
    url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
    server,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

function lagNonceRead(body: Buffer, state: RpcProxyState): Buffer {
  if (!state.staleNonceReads) return body;
  const call = JSON.parse(body.toString()) as { method?: string; params?: unknown[] };
  if (call.method !== 'eth_getTransactionCount' || !Array.isArray(call.params)) return body;
  state.staleNonceReads--;
  return Buffer.from(JSON.stringify({ ...call, params: [call.params[0], '0x0'] }));
}
