import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { USDC_DOMAIN, type FundedAccount } from '../../src/devchain/deploy.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { call } from '../support/gateway.ts';
import { devChain, startTopupHarness, USD, type TopupHarness } from '../support/topup-harness.ts';
import { signEip3009, v2Header } from '../support/x402-payloads.ts';
import { injectingProxy } from '../support/rpc-proxy.ts';
import { until } from '../support/until.ts';

/** The relayer's next `hang` sends are left unanswered and never forwarded (the RPC hangs on them). */
const state = { hang: 0 };
const hangingProxy = (target: string) => injectingProxy(target, state);

describe('attack: the cross-instance relayer lock while the RPC hangs or its holder freezes (two processes, PostgreSQL)', () => {
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
  const pay = async (p: FundedAccount) =>
    v2Header(offer, await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: p, to: h.payTo.address, value: 3n * USD }));

  test('L1: sends hang; 4 payers, 2 on each instance: how long each waits', async () => {
    const payers = await h.payers(4, 10n);
    const headers = await Promise.all(payers.map(pay));
    state.hang = 4;
    const t0 = Date.now();
    const results = await Promise.all(
      headers.map(async (hd, i) => {
        const r = await call(gateways[i % 2]!.url, 'POST', '/v1/topup', { amount: 3 }, { 'payment-signature': hd });
        return `instance ${i % 2}: ${r.status} ${r.body?.error} after ${Date.now() - t0} ms`;
      }),
    );
    state.hang = 0;
    for (const r of results) assert.doesNotMatch(r, /: 402/);
  });

  test('L2: instance A freezes (SIGSTOP) while it holds the lock in a hung send: do payers on instance B get an answer?', async () => {
    const [p1, p2] = await h.payers(2, 10n);
    const [h1, h2] = [await pay(p1!), await pay(p2!)];
    state.hang = 1;
    const a = call(gateways[0]!.url, 'POST', '/v1/topup', { amount: 3 }, { 'payment-signature': h1 }).catch((e: Error) => ({
      status: 0,
      body: { error: e.message },
    }));
    // A's send is the hung one (the proxy took it): A holds the lock. Then it freezes.
    await until(() => state.hang === 0, "A's send hangs", 30_000);
    gateways[0]!.child.kill('SIGSTOP');
    const t0 = Date.now();
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 45_000);
    let bResult: string;
    try {
      const r = await fetch(`${gateways[1]!.url}/v1/topup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'payment-signature': h2 },
        body: JSON.stringify({ amount: 3 }),
        signal: ac.signal,
      });
      bResult = `${r.status} ${(await r.text()).slice(0, 200)} after ${Date.now() - t0} ms`;
    } catch (e) {
      bResult = `no answer after ${Date.now() - t0} ms (${(e as Error).name})`;
    } finally {
      clearTimeout(timer);
      gateways[0]!.child.kill('SIGCONT');
    }
    state.hang = 0;
    await a;
    assert.doesNotMatch(bResult, /^no answer/, 'B must answer (503) in bounded time while A is frozen');
  });
});
