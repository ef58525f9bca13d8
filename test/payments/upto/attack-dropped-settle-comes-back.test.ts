import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { Hex } from 'viem';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { findPayment } from '../../../src/payments/payment-store.ts';
import type { PaymentRow } from '../../../src/payments/payment-row.ts';
import { reconcileUpto } from '../../../src/payments/upto/reconcile-upto.ts';
import { claimSend } from '../../../src/payments/upto/upto-store.ts';
import { resignRelayerTransaction } from '../../support/dropped-settlement.ts';
import { until } from '../../support/until.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { sentButUnmined, signedUptoHeader, UPTO_BODY, uptoOpenAI, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * A settle the node dropped is not dead: another node of a load-balanced endpoint may still hold
 * it and bring it back, and it pays if it is mined before the authorization's deadline. Whatever
 * the gateway decided about the dropped hash meanwhile (sent again, or given up as "dropped past
 * its deadline"), what the chain finally shows must be recorded once, and a payer whose charge
 * arrived must not be refused for it.
 */
const quiet = { info() {}, warn() {} };

const relayerNonce = (h: PayPerRequestHarness) => h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, 'latest']).then(Number);

/** One upto request whose settle is broadcast, left unmined past the settle wait, and dropped: its row and the raw transaction. */
async function droppedSettle(h: PayPerRequestHarness, payer: FundedAccount): Promise<{ row: PaymentRow; raw: Hex }> {
  await h.anvil.rpc('evm_setAutomine', [false]);
  try {
    await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
    const row = await sentButUnmined(h, payer);
    assert.equal(row.upto_state, 'settling');
    const raw = await resignRelayerTransaction(h, row.tx_hash!);
    await h.anvil.rpc('anvil_dropTransaction', [row.tx_hash]);
    return { row, raw };
  } finally {
    await h.anvil.rpc('evm_setAutomine', [true]);
  }
}

/**
 * The dropped transaction comes back: broadcast, then waited for until its receipt exists. Reading
 * the chain at once (a balance, the relayer's nonce, the reconciler's pass) has come before the
 * block that mines it on a loaded machine, and then the test saw a re-send that never happened.
 */
async function comesBackMined(h: PayPerRequestHarness, raw: Hex): Promise<void> {
  const hash = await h.anvil.rpc<Hex>('eth_sendRawTransaction', [raw]);
  let receipt: { status?: string } | null = null;
  await until(async () => (receipt = await h.anvil.rpc<{ status?: string } | null>('eth_getTransactionReceipt', [hash])) !== null, 'the returned settle mined');
  assert.equal(receipt!.status, '0x1', 'the returned settle succeeded');
}

async function chainAgrees(h: PayPerRequestHarness) {
  await assertLedgerConsistent(h.gw.services.storage.db);
  const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
  assert.deepEqual(audit.problems, [], 'ledger-check --chain');
}

for (const engine of ENGINES) {
  describe(`attack: a dropped upto settle that comes back (${engine})`, () => {
    const harness = uptoSuite(engine, { topup: { settleWaitSeconds: 2, reconcileIntervalSeconds: 3600 } });
    let anvil: PayPerRequestHarness['anvil'] | undefined;
    after(async () => anvil?.rpc('evm_setAutomine', [true]));

    test('mined before the reconciler looks again: settled from that transaction, nothing sent again, counted once', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const { row, raw } = await droppedSettle(h, payer);
      await comesBackMined(h, raw);
      const nonce = await relayerNonce(h);
      const deps = { ...h.gw.services.topup!.upto, logger: quiet, staleMs: 0 };
      await reconcileUpto({ ...deps, now: Date.now });
      await reconcileUpto({ ...deps, now: Date.now });
      const done = await findPayment(h.gw.services.storage.db, row.id);
      assert.equal(done.upto_state, 'settled', `${done.upto_state}: ${done.failure_reason}`);
      assert.equal(done.tx_hash, row.tx_hash, 'the transaction that came back');
      assert.equal(done.onchain_amount_atomic, row.settle_amount_atomic);
      assert.equal(await relayerNonce(h), nonce, 'nothing sent again');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'the charge, once');
      await chainAgrees(h);
    });

    test('sent again, then the dropped one comes back: the chain takes one, the gateway records one', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const { row, raw } = await droppedSettle(h, payer);
      await reconcileUpto({ ...h.gw.services.topup!.upto, logger: quiet, staleMs: 0, now: Date.now });
      const resent = await findPayment(h.gw.services.storage.db, row.id);
      assert.equal(resent.upto_state, 'settled', `${resent.upto_state}: ${resent.failure_reason}`);
      // The very transaction again, from another node: its relayer nonce is spent by the re-send.
      await assert.rejects(h.anvil.rpc('eth_sendRawTransaction', [raw]));
      await reconcileUpto({ ...h.gw.services.topup!.upto, logger: quiet, staleMs: 0, now: Date.now });
      const done = await findPayment(h.gw.services.storage.db, row.id);
      assert.equal(done.upto_state, 'settled');
      assert.equal(done.onchain_amount_atomic, row.settle_amount_atomic);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'the charge, once');
      await chainAgrees(h);
    });

    test('killed after taking the re-send claim (the dropped hash cleared), before sending; the dropped one then lands: found on chain, nothing sent', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const { row, raw } = await droppedSettle(h, payer);
      const db = h.gw.services.storage.db;
      // The instance that claimed the re-send died (SIGKILL) before its broadcast: the row keeps no hash.
      assert.ok(await claimSend(db, await findPayment(db, row.id), Date.now()));
      assert.equal((await findPayment(db, row.id)).tx_hash, null);
      await comesBackMined(h, raw);
      const nonce = await relayerNonce(h);
      await reconcileUpto({ ...h.gw.services.topup!.upto, logger: quiet, staleMs: 0, now: Date.now });
      const done = await findPayment(db, row.id);
      assert.equal(done.upto_state, 'settled', `${done.upto_state}: ${done.failure_reason}`);
      assert.equal(done.tx_hash, row.tx_hash, 'found in the transfer log');
      assert.equal(done.onchain_amount_atomic, row.settle_amount_atomic);
      assert.equal(await relayerNonce(h), nonce, 'nothing sent again');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'the charge, once');
      await chainAgrees(h);
    });

    test('given up as dropped in the last seconds before its deadline, then mined before the deadline: settled, and the payer not refused', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const { row, raw } = await droppedSettle(h, payer);
      const deps = { ...h.gw.services.topup!.upto, logger: quiet, staleMs: 0 };
      // A pass 5 s before the deadline: too late to send again (the 10 s margin), yet the dropped one may still land.
      await reconcileUpto({ ...deps, now: () => (row.valid_before - 5) * 1000 });
      assert.equal((await findPayment(h.gw.services.storage.db, row.id)).upto_state, 'settling', 'not given up before its deadline has passed');
      // The dropped transaction comes back and is mined, before the deadline: the charge is paid.
      await comesBackMined(h, raw);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'the charge arrived');
      // The next passes, as time goes on: before the deadline, and after it.
      await reconcileUpto({ ...deps, now: () => (row.valid_before - 2) * 1000 });
      await reconcileUpto({ ...deps, now: () => (row.valid_before + 120) * 1000 });
      const done = await findPayment(h.gw.services.storage.db, row.id);
      assert.equal(done.upto_state, 'settled', `${done.upto_state}: ${done.failure_reason}`);
      const next = await h.chat(UPTO_BODY, { 'payment-signature': (await signedUptoHeader(h, payer, UPTO_BODY)).header });
      assert.notEqual(next.status, 403, next.text);
      await chainAgrees(h);
    });
  });
}
