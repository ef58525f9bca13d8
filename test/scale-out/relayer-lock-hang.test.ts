import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { USDC_DOMAIN, type FundedAccount } from '../../src/devchain/deploy.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { call } from '../support/gateway.ts';
import { devChain, startTopupHarness, USD, type TopupHarness } from '../support/topup-harness.ts';
import { signEip3009, v2Header } from '../support/x402-payloads.ts';

/** A proxy in front of anvil that leaves the next `hang` eth_sendRawTransaction calls unanswered (never forwarded). */
const state = { hang: 0 };
async function hangingProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const c = JSON.parse(body.toString()) as { method?: string };
      if (c.method === 'eth_sendRawTransaction' && state.hang > 0) {
        state.hang--;
        setTimeout(() => res.destroy(), 120_000).unref();
        return;
      }
      const up = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers: { ...req.headers, 'content-length': String(body.length) } }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', () => res.destroy());
      up.end(body);
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  return { url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

describe('attack: the cross-instance relayer lock while the RPC hangs or its holder freezes (issue 23.1 review; two processes, PostgreSQL)', () => {
  let h: TopupHarness;
  let proxy: Awaited<ReturnType<typeof hangingProxy>>;
  const gateways: GatewayProcess[] = [];
  let offer: PaymentRequirements;
  before(async () => {
    const { anvil } = await devChain();
    proxy = await hangingProxy(anvil.rpcUrl);
    h = await startTopupHarness('postgres');
    const databaseUrl = await freshDatabaseUrl('postgres');
    const config = { ...h.gatewayConfig, chains: { [String(anvil.chainId)]: { rpcUrl: proxy.url } }, database: { url: databaseUrl } };
    const started = await Promise.allSettled([startGatewayProcess(config, h.env), startGatewayProcess(config, h.env)]);
    for (const s of started) if (s.status === 'fulfilled') gateways.push(s.value);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    offer = (await call(gateways[0]!.url, 'POST', '/v1/topup', { amount: 3 })).body.accepts[0];
  });
  after(async () => {
    for (const g of gateways) g.child.kill('SIGCONT');
    await Promise.all(gateways.map((g) => g.stop()));
    await h?.stop();
    await proxy?.close();
  });
  const pay = async (p: FundedAccount) => v2Header(offer, await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: p, to: h.payTo.address, value: 3n * USD }));

  test('L1: sends hang; 4 payers, 2 on each instance: how long each waits', async () => {
    const payers = await h.payers(4, 10n);
    const headers = await Promise.all(payers.map(pay));
    state.hang = 4;
    const t0 = Date.now();
    const results = await Promise.all(headers.map(async (hd, i) => {
      const r = await call(gateways[i % 2]!.url, 'POST', '/v1/topup', { amount: 3 }, { 'payment-signature': hd });
      return `instance ${i % 2}: ${r.status} ${r.body?.error} after ${Date.now() - t0} ms`;
    }));
    state.hang = 0;
    for (const r of results) assert.doesNotMatch(r, /: 402/);
  });

  test('L2: instance A freezes (SIGSTOP) while it holds the lock in a hung send: do payers on instance B get an answer?', async () => {
    const [p1, p2] = await h.payers(2, 10n);
    const [h1, h2] = [await pay(p1!), await pay(p2!)];
    state.hang = 1;
    const a = call(gateways[0]!.url, 'POST', '/v1/topup', { amount: 3 }, { 'payment-signature': h1 }).catch((e: Error) => ({ status: 0, body: { error: e.message } }));
    await new Promise((r) => setTimeout(r, 1500));
    gateways[0]!.child.kill('SIGSTOP');
    const t0 = Date.now();
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 45_000);
    let bResult: string;
    try {
      const r = await fetch(`${gateways[1]!.url}/v1/topup`, { method: 'POST', headers: { 'content-type': 'application/json', 'payment-signature': h2 }, body: JSON.stringify({ amount: 3 }), signal: ac.signal });
      bResult = `${r.status} ${(await r.text()).slice(0, 200)} after ${Date.now() - t0} ms`;
    } catch (e) {
      bResult = `no answer after ${Date.now() - t0} ms (${(e as Error).name})`;
    } finally {
      clearTimeout(timer);
      gateways[0]!.child.kill('SIGCONT');
    }
    state.hang = 0;
    const ar = await a;
    assert.doesNotMatch(bResult, /^no answer/, 'B must answer (503) in bounded time while A is frozen');
  });
});
