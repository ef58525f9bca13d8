import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { Hex } from 'viem';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import { localFacilitator } from '../../../src/payments/facilitator/local-facilitator.ts';
import { findPayment } from '../../../src/payments/payment-store.ts';
import { openUptoRefusal } from '../../../src/payments/upto/admission.ts';
import { finishSettling, reconcileUpto } from '../../../src/payments/upto/reconcile-upto.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { sentButUnmined, UPTO_BODY, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import type { PaymentRow } from '../../../src/payments/payment-row.ts';

/**
 * An upto settle whose transaction the node drops (evicted from its pool, a node restart) after the
 * receipt wait gave up. The facilitator's memory of pending settlements kept the dead hash and every
 * later settle of the authorization waited on it again, and the deadline never ended it: the
 * payment stayed `settling`, the payer 409 UPTO_BUSY, the charge never collected, nothing counted
 * or listed. A dropped settle is sent again while its authorization is valid, by one instance, and
 * recorded unsettled past its deadline.
 */
const quiet = { info() {}, warn() {} };

/** One upto request whose settle is broadcast, waits out topup.settleWaitSeconds unmined, and is then dropped by the node. */
async function settleThenDrop(h: PayPerRequestHarness, payer: FundedAccount): Promise<PaymentRow> {
  await h.anvil.rpc('evm_setAutomine', [false]);
  try {
    await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
    const row = await sentButUnmined(h, payer);
    assert.equal(row.upto_state, 'settling');
    await h.anvil.rpc('anvil_dropTransaction', [row.tx_hash]);
    return row;
  } finally {
    await h.anvil.rpc('evm_setAutomine', [true]);
  }
}

const resentMetric = async (h: PayPerRequestHarness) => (await h.gw.services.metrics.uptoSettlesResent.get()).values.reduce((a, v) => a + v.value, 0);
const relayerNonce = (h: PayPerRequestHarness) => h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, 'latest']).then(Number);

async function chainAgrees(h: PayPerRequestHarness) {
  await assertLedgerConsistent(h.gw.services.storage.db);
  const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
  assert.deepEqual(audit.problems, [], 'ledger-check --chain');
}

for (const engine of ENGINES) {
  describe(`attack: a dropped upto settle (${engine})`, () => {
    // The background reconciler runs once, at start-up: these tests run its passes themselves.
    const harness = uptoSuite(engine, { topup: { settleWaitSeconds: 2, reconcileIntervalSeconds: 3600 } });
    let anvil: PayPerRequestHarness['anvil'] | undefined;
    after(async () => anvil?.rpc('evm_setAutomine', [true]));

    test('sent again by the reconciler and settled for the charge; counted; the payer free again', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const resentBefore = await resentMetric(h);
      const row = await settleThenDrop(h, payer);
      const nonce = await relayerNonce(h);
      await h.gw.services.storage.db
        .updateTable('payments')
        .set({ updated_at: Date.now() - 60_000 })
        .where('id', '=', row.id)
        .execute();
      await h.gw.services.topup!.reconcile();
      const done = await findPayment(h.gw.services.storage.db, row.id);
      assert.equal(done.upto_state, 'settled', `${done.upto_state}: ${done.failure_reason}`);
      // Sent again on the relayer's same nonce: the same transaction, signed again, mined this time.
      assert.equal(await relayerNonce(h), nonce + 1, 'one transaction mined');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'the charge, once');
      assert.equal(await resentMetric(h), resentBefore + 1, 'tollgate_upto_settles_resent_total');
      const next = await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
      assert.match(next.choices[0]!.message.content!, /fake provider/, 'not UPTO_BUSY');
      await chainAgrees(h);
    });

    test('past its deadline: recorded unsettled, counted, listed, and the payer told it can no longer be collected', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const row = await settleThenDrop(h, payer);
      let counted = 0;
      const deps = { ...h.gw.services.topup!.upto, countUnsettled: () => void counted++, logger: quiet };
      const pastDeadline = () => (row.valid_before + 120) * 1000;
      const nonce = await relayerNonce(h);
      await reconcileUpto({ ...deps, now: pastDeadline, staleMs: 0 });
      const given = await findPayment(h.gw.services.storage.db, row.id);
      assert.equal(given.upto_state, 'unsettled');
      assert.match(given.failure_reason!, /dropped by the node and the authorization expired/);
      assert.equal(counted, 1);
      assert.equal(await relayerNonce(h), nonce, 'nothing sent past the deadline');
      const ledger = await checkLedger(h.gw.services.storage.db);
      assert.ok(
        ledger.findings.some((f) => f.includes(`upto payment ${row.id}`)),
        'ledger-check lists it',
      );
      const told = openUptoRefusal(given, { nowMs: pastDeadline(), retryEverySeconds: 30 });
      assert.equal(told.status, 403);
      assert.match(told.message, /expired at .* without being settled, so it can no longer move anything/);
      assert.match(told.message, new RegExp(`tollgate admin upto write-off ${row.id}`));
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('two instances finishing it at once: one sends, one transaction', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const row = await settleThenDrop(h, payer);
      // A second gateway on the same database and relayer key: its own facilitator, its own memory.
      const rpcUrls = { [h.chain.network]: h.anvil.rpcUrl };
      const other = localFacilitator({ relayerKey: h.relayer.privateKey as Hex, rpcUrls, allowedFactories: [], confirmationTimeoutMs: 5_000 });
      const ours = { ...h.gw.services.topup!.upto, logger: quiet, now: Date.now };
      const nonce = await relayerNonce(h);
      const seen = await findPayment(h.gw.services.storage.db, row.id);
      await Promise.all([finishSettling(ours, seen), finishSettling({ ...ours, facilitator: other }, seen)]);
      assert.equal(await relayerNonce(h), nonce + 1, 'one transaction sent again');
      const done = await findPayment(h.gw.services.storage.db, row.id);
      assert.equal(done.upto_state, 'settled', `${done.upto_state}: ${done.failure_reason}`);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!));
      assert.equal((await uptoPayments(h, payer)).length, 1);
      await chainAgrees(h);
    });
  });
}
