import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { ENGINES, freshDatabaseUrl } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../../support/gateway-process.ts';
import { startTopupHarness, USD, type TopupHarness, usdcAuthorization } from '../../support/topup-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';

/**
 * A payment recorded but never sent. `tollgate serve` stops at a test-only fail point
 * (TOLLGATE_TEST_HANG_BEFORE_BROADCAST: after the payment is recorded and verified, before its
 * settlement is sent) and is killed with SIGKILL there. Nothing on chain refers to the
 * authorization; after the restart the client's retry of the same payment must settle it, once.
 */
for (const engine of ENGINES) {
  describe(`a payment recorded but never sent is released after a crash (${engine})`, () => {
    let h: TopupHarness;
    let storage: Storage;
    let databaseUrl: string;
    const processes: GatewayProcess[] = [];
    before(async () => {
      h = await startTopupHarness(engine);
      databaseUrl = await freshDatabaseUrl(engine);
      storage = openStorage(databaseUrl, { poolSize: 2 });
    });
    after(async () => {
      await Promise.all(processes.map((p) => p.stop()));
      await storage?.close();
      await h?.stop();
    });

    test('SIGKILL between record and broadcast; after the restart the same payment is credited once', async () => {
      const config = { ...h.gatewayConfig, database: { url: databaseUrl }, topup: { ...(h.gatewayConfig.topup as object), settleWaitSeconds: 3 } };
      const crashing = await startGatewayProcess(config, { ...h.env, TOLLGATE_TEST_HANG_BEFORE_BROADCAST: '1' });
      processes.push(crashing);
      const payer = await h.payer();
      const offer = (await call(crashing.url, 'POST', '/v1/topup', { amount: 5 })).body.accepts[0];
      const payload = await usdcAuthorization(h, payer, 5n * USD);
      const header = v2Header(offer, payload);

      const request = call(crashing.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': header }).catch((err: Error) => err);
      while (!crashing.output().includes('test fail point reached')) await new Promise((r) => setTimeout(r, 20));
      await crashing.kill();
      assert.ok((await request) instanceof Error, 'the request should have died with the gateway');
      const recorded = await storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).executeTakeFirstOrThrow();
      assert.equal(recorded.status, 'pending');
      assert.equal(recorded.tx_hash, null, 'nothing was sent');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 100n * USD);

      // The client retries the very same payment against the restarted gateway.
      const restarted = await startGatewayProcess(config, h.env);
      processes.push(restarted);
      const retry = await call(restarted.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': header });
      assert.equal(retry.status, 200, retry.text);
      assert.equal(retry.body.credited_usdc, 5_000_000);
      const again = await call(restarted.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': header });
      assert.deepEqual(again.body, retry.body);

      const rows = await storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute();
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.id, recorded.id, 'the recorded payment itself was settled');
      assert.equal(rows[0]!.status, 'credited');
      const entries = await storage.db.selectFrom('ledger_entries').selectAll().where('wallet', '=', payer.address.toLowerCase()).execute();
      assert.deepEqual(
        entries.map((e) => Number(e.amount_usdc)),
        [5_000_000],
      );
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 95n * USD);
      assert.deepEqual((await checkLedger(storage.db)).problems, []);
    });
  });
}
