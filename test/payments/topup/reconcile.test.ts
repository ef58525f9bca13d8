import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import { openStorage } from '../../../src/storage/database.ts';
import { call } from '../../support/gateway.ts';
import { freshDatabaseUrl } from '../../support/engines.ts';
import { startGatewayProcess } from '../../support/gateway-process.ts';
import { proofQuery, siweProof } from '../../support/siwe.ts';
import { startTopupHarness, USD, type TopupHarness, usdcAuthorization } from '../../support/topup-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { until } from '../../support/until.ts';

/**
 * Payments whose outcome is not known when the request ends. Mining is paused so that the
 * settlement transaction sits in anvil's mempool: sent, but with no receipt yet.
 */
describe('unknown outcomes and crashes are finished by the reconciler, exactly once', () => {
  let h: TopupHarness;
  let usdcOffer: PaymentRequirements;
  before(async () => {
    h = await startTopupHarness('sqlite', { config: { topup: { settleWaitSeconds: 1 } } });
    usdcOffer = (await h.post({ amount: 5 })).body.accepts[0];
  });
  after(async () => {
    await h.anvil.rpc('evm_setAutomine', [true]);
    await h.stop();
  });

  const payment = async () => {
    const payer = await h.payer();
    const payload = await usdcAuthorization(h, payer, 5n * USD);
    return { payer, header: v2Header(usdcOffer, payload) };
  };

  test('no receipt within settleWaitSeconds: 202 pending, credited once when it lands', async () => {
    const { payer, header } = await payment();
    await h.anvil.rpc('evm_setAutomine', [false]);
    let res;
    try {
      res = await h.post({ amount: 5 }, { 'payment-signature': header });
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
    }
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.status, 'pending');
    assert.match(res.body.transaction, /^0x[0-9a-f]{64}$/);
    assert.equal(await h.balance(payer.address), 0);
    const history = await call(h.gw.url, 'GET', `/v1/topups/${payer.address}?${proofQuery(await siweProof(payer))}`);
    assert.equal(history.body.topups[0].status, 'pending');

    await h.anvil.rpc('evm_mine');
    const report = await h.gw.services.topup!.reconcile();
    assert.equal(report.credited, 1);
    assert.equal(await h.balance(payer.address), 5_000_000);
    // A second pass, and a retry of the same payment, change nothing.
    assert.equal((await h.gw.services.topup!.reconcile()).credited, 0);
    const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(retry.status, 200, retry.text);
    assert.equal(retry.body.transaction, res.body.transaction);
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 95n * USD);
    await h.gw.assertLedger();
  });

  test('SIGKILL after the settlement was sent and before the credit: the restarted gateway credits once', async () => {
    const databaseUrl = await freshDatabaseUrl('sqlite');
    const config = { ...h.gatewayConfig, database: { url: databaseUrl }, topup: { ...(h.gatewayConfig.topup as object), settleWaitSeconds: 60 } };
    const { payer, header } = await payment();
    const storage = openStorage(databaseUrl);
    let gateway = await startGatewayProcess(config, h.env);
    try {
      await h.anvil.rpc('evm_setAutomine', [false]);
      const request = call(gateway.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': header }).catch((err: Error) => err);

      // Wait until the gateway has sent its settlement transaction (recorded, and in the node's pool:
      // the hash is recorded just before the send), then kill it mid-wait.
      const findSent = async () => {
        const row = await storage.db.selectFrom('payments').selectAll().where('status', '=', 'submitted').executeTakeFirst();
        return row?.tx_hash && (await h.anvil.rpc('eth_getTransactionByHash', [row.tx_hash])) ? row : undefined;
      };
      let submitted = await findSent();
      await until(async () => (submitted ??= await findSent()) !== undefined, 'the gateway recorded and sent a settlement transaction', 30_000);
      assert.ok(submitted?.tx_hash, 'the gateway never recorded a settlement transaction');
      await gateway.kill();
      assert.ok((await request) instanceof Error, 'the request should have died with the gateway');
      assert.equal(await h.balance(payer.address), 0);

      // The transaction lands while no gateway is running.
      await h.anvil.rpc('evm_setAutomine', [true]);
      await h.anvil.rpc('evm_mine');

      gateway = await startGatewayProcess(config, h.env);
      let row;
      const sentId = submitted.id;
      // The restarted gateway's reconciler credits it: generous for a loaded machine.
      await until(
        async () => {
          row = await storage.db.selectFrom('payments').selectAll().where('id', '=', sentId).executeTakeFirstOrThrow();
          return row.status === 'credited';
        },
        'the restarted gateway credited it',
        30_000,
      );
      assert.equal(row!.status, 'credited');
      assert.equal(row!.tx_hash, submitted.tx_hash);

      // Another restart and a retry by the client: still one credit.
      await gateway.stop();
      gateway = await startGatewayProcess(config, h.env);
      const retry = await call(gateway.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': header });
      assert.equal(retry.status, 200, retry.text);
      assert.equal(retry.body.balance_usdc, 5_000_000);
      const entries = await storage.db.selectFrom('ledger_entries').selectAll().where('wallet', '=', payer.address.toLowerCase()).execute();
      assert.equal(entries.length, 1);
      assert.equal(Number(entries[0]!.amount_usdc), 5_000_000);
      const ledger = await checkLedger(storage.db);
      assert.deepEqual(ledger.problems, []);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 95n * USD);
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
      await gateway.stop();
      await storage.close();
    }
  });
});
