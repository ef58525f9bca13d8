import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { USDC_DOMAIN } from '../../../src/devchain/deploy.ts';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { ENGINES, freshDatabaseUrl } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../../support/gateway-process.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { signEip3009, v2Header } from '../../support/x402-payloads.ts';
import { until } from '../../support/until.ts';

/**
 * SIGKILL while ten settlements from one relayer are in flight. Mining is paused, so at
 * the kill some payments are recorded and not yet sent, others sent and waiting in the mempool.
 * After the restart: nothing credited twice, nothing lost, and every payer's retry of the same
 * payment ends credited.
 */
for (const engine of ENGINES) {
  describe(`SIGKILL with ten settlements in flight (${engine})`, () => {
    let h: TopupHarness;
    let storage: Storage;
    const processes: GatewayProcess[] = [];
    let config: Record<string, unknown>;
    before(async () => {
      h = await startTopupHarness(engine);
      const databaseUrl = await freshDatabaseUrl(engine);
      storage = openStorage(databaseUrl, { poolSize: 2 });
      config = { ...h.gatewayConfig, database: { url: databaseUrl }, topup: { ...(h.gatewayConfig.topup as object), settleWaitSeconds: 3 } };
    });
    after(async () => {
      await h.anvil.rpc('evm_setAutomine', [true]);
      await Promise.all(processes.map((p) => p.stop()));
      await storage?.close();
      await h?.stop();
    });

    test('after the restart every retry of the same payment is credited, each exactly once', async () => {
      const crashing = await startGatewayProcess(config, h.env);
      processes.push(crashing);
      const offer = (await call(crashing.url, 'POST', '/v1/topup', { amount: 5 })).body.accepts[0];
      const payers = await h.payers(10, 10n);
      const headers = await Promise.all(
        payers.map(async (p) =>
          v2Header(
            offer,
            await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: p, to: h.payTo.address, value: 5n * USD }),
          ),
        ),
      );

      await h.anvil.rpc('evm_setAutomine', [false]);
      const inFlight = headers.map((header) =>
        call(crashing.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': header }).catch((err: Error) => err),
      );
      // Kill once every payment is recorded and some (not necessarily all) settlements are sent.
      const rows = () => storage.db.selectFrom('payments').select(['status']).execute();
      // Ten verifications and sends at once: seconds on a loaded machine, so a generous wait.
      await until(
        async () => {
          const now = await rows();
          return now.length === 10 && now.some((r) => r.status === 'submitted');
        },
        'every payment recorded and one settlement sent',
        30_000,
      );
      await crashing.kill();
      for (const r of await Promise.all(inFlight)) assert.ok(r instanceof Error, 'every request died with the gateway');
      const atKill = await rows();
      assert.equal(atKill.length, 10);
      assert.ok(
        atKill.every((r) => r.status === 'pending' || r.status === 'submitted'),
        JSON.stringify(atKill),
      );
      await h.anvil.rpc('evm_setAutomine', [true]);
      await h.anvil.rpc('evm_mine');

      const restarted = await startGatewayProcess(config, h.env);
      processes.push(restarted);
      const retries = await Promise.all(headers.map((header) => call(restarted.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': header })));
      for (const r of retries) {
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.credited_usdc, 5_000_000);
      }
      for (const p of payers) {
        const wallet = p.address.toLowerCase();
        const payments = await storage.db.selectFrom('payments').selectAll().where('payer', '=', wallet).execute();
        assert.deepEqual(
          payments.map((x) => x.status),
          ['credited'],
        );
        const entries = await storage.db.selectFrom('ledger_entries').selectAll().where('wallet', '=', wallet).execute();
        assert.deepEqual(
          entries.map((e) => Number(e.amount_usdc)),
          [5_000_000],
          'credited once',
        );
        assert.equal(await h.chain.balanceOf(h.chain.usdc, p.address), 5n * USD, 'paid once on chain');
      }
      await assertLedgerAndChainAgree(storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 10);
    });
  });
}
