import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { channelSuite, paid, voucherHeader } from './channel-harness.ts';
import { claimPass } from './claims-setup.ts';
import { SHORT_WAIT, askRefund, assertRefundRecordedOnce, pendingRefund } from './review-refund-setup.ts';

/**
 * A refund whose transaction is still in the mempool when its 15-minute hold runs out (a stuck
 * relayer nonce, a congested chain): it can still mine afterwards. Whenever it does, it must be
 * recorded (refunded_usdc, its transfer), or ledger-check --chain finds the mirror short.
 */
const holdRunsOut = (h: PayPerRequestHarness, channelId: string) =>
  h.gw.services.storage.db
    .updateTable('channels')
    .set({ lease_until: Date.now() - 1 })
    .where('channel_id', '=', channelId)
    .execute();

for (const engine of ENGINES) {
  describe(`attack: a refund mined after its hold ran out (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    // The retry takes the expired lease (takeLease), is refused as a replayed voucher (402) and drops the lease: `refund-tx:<hash>`,
    // the only place the hash was kept, is gone, so no claim pass ever reads the receipt; the mined refund is never recorded.
    const lostHash = 'BREAK: a refund mined after its hold ran out is never recorded (refunded_usdc 0, no transfer)';
    test('the payer asks again after the hold ran out, then the refund mines: the next claim pass records it once', { todo: lostHash }, async () => {
      const h = harness();
      const r = await pendingRefund(h);
      try {
        await holdRunsOut(h, r.before.channel_id);
        const again = await askRefund(h, r.header);
        assert.notEqual(again.status, 500, again.text);
      } finally {
        await r.mine();
      }
      const pass = await claimPass(h, {}, true);
      assert.deepEqual(pass.failures, []);
      await assertRefundRecordedOnce(h, r);
    });

    // The request is served (200) against escrow the refund then pays back: its charge can never be claimed, and the refund is lost as above.
    const servedMeanwhile = 'BREAK: a request is served after the hold ran out while the refund can still mine; the refund is then never recorded';
    test('a request served on the channel after the hold ran out, then the refund mines: the refund is still recorded once', {
      todo: servedMeanwhile,
    }, async () => {
      const h = harness();
      const r = await pendingRefund(h);
      let served = 0;
      try {
        await holdRunsOut(h, r.before.channel_id);
        const spend = await voucherHeader(h, r.payer, (ceiling, charged) => charged + ceiling);
        served = (await paid(h, spend.header)).status;
      } finally {
        await r.mine();
      }
      const pass = await claimPass(h, {}, true);
      assert.ok(served > 0);
      assert.deepEqual(pass.failures, []);
      await assertRefundRecordedOnce(h, r);
    });

    // The dropped refund never mines, yet its voucher stays marked spent (last_refund_signature): the same refund asked again is
    // refused as a replay (402) for as long as nothing more is charged, since a refund voucher's signature is deterministic.
    const droppedVoucher = 'BREAK: a refund whose transaction was dropped keeps its voucher spent: the payer cannot ask the refund again';
    test('the refund transaction dropped from the mempool: after the hold the payer asks again and is refunded once', { todo: droppedVoucher }, async () => {
      const h = harness();
      const r = await pendingRefund(h);
      try {
        await h.anvil.rpc('anvil_dropTransaction', [r.transaction]);
        await holdRunsOut(h, r.before.channel_id);
      } finally {
        await r.mine();
      }
      const again = await askRefund(h, r.header);
      assert.equal(again.status, 200, again.text);
      assert.equal(again.body.refunded_usdc, r.before.balance_usdc - r.before.charged_usdc);
      await assertRefundRecordedOnce(h, { ...r, transaction: again.body.transaction });
    });
  });
}
