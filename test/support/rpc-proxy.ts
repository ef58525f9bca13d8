import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/**
 * JSON-RPC proxies in front of anvil that a test can turn into a bad RPC endpoint. One server does
 * the forwarding; each kind of misbehaviour is a hook that sees the call first (`jsonRpcProxy`).
 */

/** A JSON-RPC call as the proxy sees it. */
export interface RpcCall {
  id?: unknown;
  method?: string;
  params?: unknown[];
}

/** What a hook can do with a call besides answering `res` itself. */
export interface Upstream {
  /** Sends `body` to the node and pipes its answer to the client. */
  forward(body: Buffer): void;
  /** Sends `body` to the node and hands its parsed answer to `answer` (which answers the client, or not). */
  forwardThen(body: Buffer, answer: (reply: { result?: unknown; [k: string]: unknown }) => void): void;
}

/** Returns true when it took care of the call; false lets the proxy forward it as it is. */
export type RpcHook = (call: RpcCall, body: Buffer, res: ServerResponse, upstream: Upstream) => boolean;

export interface RunningProxy {
  url: string;
  server: Server;
  close(): Promise<void>;
}

export async function jsonRpcProxy(target: string, hook: RpcHook, opts: { cut?: () => boolean } = {}): Promise<RunningProxy> {
  const to = new URL(target);
  const send = (req: IncomingMessage, body: Buffer, onAnswer: (r: IncomingMessage) => void, res: ServerResponse) => {
    const headers = { ...req.headers, 'content-length': String(body.length) };
    const upstream = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers }, onAnswer);
    upstream.on('error', () => res.destroy());
    upstream.end(body);
  };
  const server = createServer((req, res) => {
    if (opts.cut?.()) {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const upstream: Upstream = {
        forward: (b) =>
          send(
            req,
            b,
            (r) => {
              res.writeHead(r.statusCode ?? 502, r.headers);
              r.pipe(res);
            },
            res,
          ),
        forwardThen: (b, answer) =>
          send(
            req,
            b,
            (r) => {
              const got: Buffer[] = [];
              r.on('data', (c: Buffer) => got.push(c));
              r.on('end', () => answer(JSON.parse(Buffer.concat(got).toString())));
            },
            res,
          ),
      };
      if (!hook(JSON.parse(body.toString()) as RpcCall, body, res, upstream)) upstream.forward(body);
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  return {
    url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
    server,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * Cut (`up` false: connections dropped, as a dead RPC does), or lagging (`staleNonceReads` > 0: that
 * many `eth_getTransactionCount` calls are answered as of the genesis block, as a load-balanced
 * endpoint whose node is behind answers them; the node then refuses the transaction built on it).
 */
export interface RpcProxyState {
  up: boolean;
  staleNonceReads?: number;
}

export function rpcProxy(target: string, state: RpcProxyState): Promise<RunningProxy> {
  return jsonRpcProxy(
    target,
    (call, _body, _res, upstream) => {
      if (!state.staleNonceReads || call.method !== 'eth_getTransactionCount' || !Array.isArray(call.params)) return false;
      state.staleNonceReads--;
      upstream.forward(Buffer.from(JSON.stringify({ ...call, params: [call.params[0], '0x0'] })));
      return true;
    },
    { cut: () => !state.up },
  );
}

/**
 * The relayer's sends misbehaving, each for its next N calls: `sendError`, refused with that node
 * message; `hang`, never answered nor forwarded; `swallow`, forwarded but the answer lost; `ahead`,
 * nonce reads answered one above the node's (a node ahead of the others).
 */
export interface Inject {
  sendError?: string;
  swallow?: number;
  hang?: number;
  ahead?: number;
}

export function injectingProxy(target: string, state: Inject): Promise<RunningProxy> {
  return jsonRpcProxy(target, (call, body, res, upstream) => {
    if (call.method === 'eth_sendRawTransaction' && state.sendError) {
      const message = state.sendError;
      state.sendError = undefined;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32000, message } }));
      return true;
    }
    if (call.method === 'eth_getTransactionCount' && state.ahead) {
      state.ahead--;
      upstream.forwardThen(body, (reply) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ...reply, result: `0x${(BigInt(reply.result as string) + 1n).toString(16)}` }));
      });
      return true;
    }
    if (call.method === 'eth_sendRawTransaction' && state.hang) {
      state.hang--;
      return true; // never answered, never forwarded
    }
    if (call.method === 'eth_sendRawTransaction' && state.swallow) {
      state.swallow--;
      upstream.forwardThen(body, () => {}); // the node takes it; the answer is lost
      return true;
    }
    return false;
  });
}
