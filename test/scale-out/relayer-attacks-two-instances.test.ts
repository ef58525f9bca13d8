import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { USDC_DOMAIN, type FundedAccount } from '../../src/devchain/deploy.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { assertLedgerAndChainAgree } from '../support/ledger.ts';
import { startTopupHarness, USD, type TopupHarness } from '../support/topup-harness.ts';
import { call } from '../support/gateway.ts';
import { signEip3009, signPermit2, v2Header } from '../support/x402-payloads.ts';

describe('attack: the same payment sent to two processes sharing one relayer key at once (PostgreSQL)', () => {
  let h: TopupHarness;
  let storage: Storage;
  const gateways: GatewayProcess[] = [];
  let offers: PaymentRequirements[];
  before(async () => {
    h = await startTopupHarness('postgres');
    const databaseUrl = await freshDatabaseUrl('postgres');
    const config = { ...h.gatewayConfig, database: { url: databaseUrl } };
    const started = await Promise.allSettled([startGatewayProcess(config, h.env), startGatewayProcess(config, h.env)]);
    for (const s of started) if (s.status === 'fulfilled') gateways.push(s.value);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    storage = openStorage(databaseUrl, { poolSize: 2 });
    offers = (await call(gateways[0]!.url, 'POST', '/v1/topup', { amount: 3 })).body.accepts;
  });
  after(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await storage?.close();
    await h?.stop();
  });

  test('6 payers (USDC and USDT mixed), each payment sent twice to each instance at once: each credited exactly once, never rejected', async () => {
    const payers = await h.payers(6, 10n);
    const method = (i: number) => (i % 2 ? 'permit2' : 'eip3009');
    for (const [i, p] of payers.entries()) if (method(i) === 'permit2') await h.chain.approvePermit2(p, h.chain.usdt);
    const header = async (p: FundedAccount, i: number) =>
      method(i) === 'eip3009'
        ? v2Header(
            offers[0]!,
            await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: p, to: h.payTo.address, value: 3n * USD }),
          )
        : v2Header(offers[1]!, await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: p, to: h.payTo.address, amount: 3n * USD }));
    const headers = await Promise.all(payers.map((p, i) => header(p, i)));
    const results = await Promise.all(
      headers.flatMap((hd) =>
        [0, 1, 0, 1].map(async (g) => {
          const r = await call(gateways[g]!.url, 'POST', '/v1/topup', { amount: 3 }, { 'payment-signature': hd });
          return `${r.status} ${r.body?.error ?? r.body?.status ?? r.body?.credited_usdc}`;
        }),
      ),
    );
    for (const r of results) assert.match(r, /^(200|202)/);
    await new Promise((r) => setTimeout(r, 6000));
    for (const [i, p] of payers.entries()) {
      const rows = await storage.db.selectFrom('payments').selectAll().where('payer', '=', p.address.toLowerCase()).execute();
      assert.deepEqual(
        rows.map((r) => r.status),
        ['credited'],
      );
      assert.equal(await h.chain.balanceOf(method(i) === 'eip3009' ? h.chain.usdc : h.chain.usdt, p.address), 7n * USD);
    }
    await assertLedgerAndChainAgree(storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 6);
  });
});
