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

    // A retry must not take the expired `refund-tx:<hash>` lease (the only place the hash is kept) and drop it: no claim pass would
    // then read the receipt, and the mined refund would never be recorded (refunded_usdc 0, no transfer).
    test('the payer asks again after the hold ran out, then the refund mines: the next claim pass records it once', async () => {
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

    // A request served (200) here would be charged against escrow the refund then pays back: its charge could never be claimed,
    // and the refund would be lost as above.
    test('a request served on the channel after the hold ran out, then the refund mines: the refund is still recorded once', async () => {
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
      assert.notEqual(served, 200, 'no request is served on escrow a refund in flight may still pay back');
      assert.deepEqual(pass.failures, []);
      await assertRefundRecordedOnce(h, r);
    });

    // The dropped refund never mines: its voucher must not stay marked spent (last_refund_signature), or the same refund asked again
    // is refused as a replay (402) for as long as nothing more is charged, since a refund voucher's signature is deterministic.
    test('the refund transaction dropped from the mempool: after the hold the payer asks again and is refunded once', async () => {
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
