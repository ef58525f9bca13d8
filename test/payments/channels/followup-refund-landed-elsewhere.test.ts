import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { channelOf, channelSuite, paid, voucherHeader } from './channel-harness.ts';
import { claimPass } from './claims-setup.ts';
import { assertBooksEqualChain, assertUnbookedWithoutLogs, expireHold, replaceWithHigherFee } from './followup-setup.ts';
import { SHORT_WAIT, askRefund, pendingRefund, refundsOf, type PendingRefund } from './review-refund-setup.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

/** The refund landed once, recorded once under `transaction` with the chain's amount, the channel given back. */
async function assertRecordedOnce(h: PayPerRequestHarness, r: PendingRefund, transaction: string): Promise<void> {
  const owed = r.before.balance_usdc - r.before.charged_usdc;
  assert.equal(await h.chain.balanceOf(h.chain.usdc, r.payer.address), r.payerUsdc + BigInt(owed), 'the payer got the rest of its escrow, once');
  const after = (await channelOf(h, r.payer))!;
  assert.equal(after.lease_owner, null, 'the channel is given back');
  assert.deepEqual(await refundsOf(h, after.channel_id), [[owed, transaction.toLowerCase()]], 'one refund transfer');
  assert.equal(after.refunded_usdc, owed, 'refunded_usdc counts it once');
  await assertBooksEqualChain(h);
}

/** A refund left pending, then replaced on the node at a higher fee and mined: it landed under `replacement`. */
async function replacedRefund(h: PayPerRequestHarness): Promise<{ r: PendingRefund; replacement: string }> {
  const r = await pendingRefund(h);
  try {
    return { r, replacement: await replaceWithHigherFee(h, r.transaction) };
  } finally {
    await r.mine();
  }
}

/**
 * A refund held as `refund-tx:<hash>:<nonce>` whose transaction the node replaced (re-broadcast at
 * another fee): the refund landed under a hash the gateway never saw. The contract's refund nonce,
 * past the one the hold spends, says a refund spending it landed; its Refunded event (by channel
 * id and nonce) says which and how much. Recorded from those, once; never from anyone's word.
 */
for (const engine of ENGINES) {
  describe(`attack: a refund that landed under a hash the gateway does not know (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    test('the claim pass records it once from the Refunded event and gives the channel back; a second pass records nothing', async () => {
      const h = harness();
      const { r, replacement } = await replacedRefund(h);
      const pass = await claimPass(h, {}, true);
      assert.deepEqual(pass.refunds, [{ channel: r.before.channel_id, transaction: replacement, landed: true }], pass.failures.join('\n'));
      await assertRecordedOnce(h, r, replacement);
      const again = await claimPass(h, {}, true);
      assert.deepEqual(again.refunds, []);
      await assertRecordedOnce(h, r, replacement);
      const spend = await voucherHeader(h, r.payer, (ceiling, charged) => charged + ceiling);
      assert.notEqual((await paid(h, spend.header)).status, 500, 'the channel serves again (its escrow is what the chain says)');
    });

    test("the payer's retry finds it: 200 with the replacement's transaction, recorded once", async () => {
      const h = harness();
      const { r, replacement } = await replacedRefund(h);
      const retry = await askRefund(h, r.header);
      assert.equal(retry.status, 200, retry.text);
      assert.equal(retry.body.transaction, replacement);
      assert.equal(retry.body.refunded_usdc, r.before.balance_usdc - r.before.charged_usdc);
      await assertRecordedOnce(h, r, replacement);
    });

    test('the event cannot be found (the RPC refuses logs): nothing booked, held, the retry 503; booked once from the event when logs work', async () => {
      const h = harness();
      const { r, replacement } = await replacedRefund(h);
      await assertUnbookedWithoutLogs(h, r.before.channel_id, '0', r.header);
      const later = await claimPass(h, {}, true);
      assert.deepEqual(later.refunds, [{ channel: r.before.channel_id, transaction: replacement, landed: true }], later.failures.join('\n'));
      assert.deepEqual(later.unresolved, []);
      await assertRecordedOnce(h, r, replacement);
    });
  });

  describe(`attack: a forged 'refund nonce moved' the chain does not show (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    test('a mirror claiming the nonce moved, the refund gone from the node: nothing is recorded and the channel stays held', async () => {
      const h = harness();
      const r = await pendingRefund(h);
      const db = h.gw.services.storage.db;
      try {
        await h.anvil.rpc('anvil_dropTransaction', [r.transaction]);
        // A lying snapshot (a facilitator's, a stale writer's) puts a later refund nonce in the mirror.
        await db.updateTable('channels').set({ refund_nonce: '7' }).where('channel_id', '=', r.before.channel_id).execute();
        const pass = await claimPass(h, {}, true);
        assert.deepEqual(pass.refunds, []);
        const held = (await channelOf(h, r.payer))!;
        assert.equal(held.lease_owner?.startsWith(`refund-tx:${r.transaction.toLowerCase()}`), true, 'still held');
        assert.deepEqual(await refundsOf(h, r.before.channel_id), []);
        assert.equal(held.refunded_usdc, 0);
      } finally {
        await r.mine();
      }
      // Past its hold the node's word (gone) and the chain's (nonce unmoved) say dropped: released, nothing booked.
      await expireHold(h, r.before.channel_id);
      const later = await claimPass(h, {}, true);
      assert.deepEqual(later.refunds, [{ channel: r.before.channel_id, transaction: r.transaction, landed: false }]);
      assert.deepEqual(await refundsOf(h, r.before.channel_id), []);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, r.payer.address), r.payerUsdc, 'nothing moved to the payer');
      await assertBooksEqualChain(h);
    });
  });
}
