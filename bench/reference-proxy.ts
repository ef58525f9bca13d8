import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

/**
 * The reference for "what Node can do": a minimal pass-through proxy on node:http and
 * undici.request. No auth, no billing, no parsing: bytes in, bytes out, streams included.
 * Usage: node reference-proxy.ts <upstream origin>
 */
const upstream = new URL(process.argv[2] ?? '');
const pool = new Pool(upstream.origin, { connections: 4096, pipelining: 1 });
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'content-length']);

function forwardHeaders(headers: IncomingMessage['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const path = `${upstream.pathname.replace(/\/v1$/, '')}${req.url ?? '/'}`;
  const answer = await pool.request({
    method: req.method as 'POST',
    path,
    headers: forwardHeaders(req.headers),
    body: Buffer.concat(chunks),
  });
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  }
  res.writeHead(answer.statusCode, headers);
  res.on('close', () => answer.body.destroy());
  for await (const chunk of answer.body) res.write(chunk);
  res.end();
}

const server = createServer((req, res) => {
  handle(req, res).catch(() => {
    if (!res.headersSent) res.writeHead(502).end();
    else res.destroy();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ ready: true, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
