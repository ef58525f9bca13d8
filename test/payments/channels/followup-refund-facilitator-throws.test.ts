import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { channelOf, channelSuite, openedChannel, paid, voucherHeader } from './channel-harness.ts';
import { claimPass } from './claims-setup.ts';
import { assertBooksEqualChain, expireHold, facilitatorThrowsOnRefund, pooled } from './followup-setup.ts';
import { SHORT_WAIT, askRefund, refundsOf, signedRefund } from './review-refund-setup.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

/** A channel whose refund was asked while the facilitator threw `when` sending it. */
async function refundThrown(h: PayPerRequestHarness, when: 'before' | 'after') {
  const payer = await openedChannel(h);
  const before = (await channelOf(h, payer))!;
  const payerUsdc = await h.chain.balanceOf(h.chain.usdc, payer.address);
  const header = await signedRefund(h, payer);
  const restore = facilitatorThrowsOnRefund(h, when);
  try {
    return { payer, before, payerUsdc, header, first: await askRefund(h, header) };
  } finally {
    restore();
  }
}

/**
 * The facilitator throws instead of answering while it sends a refund: the refund may be on its
 * way to the chain or not, and the gateway cannot tell. Freeing the channel could serve requests on
 * escrow about to be paid back; telling the payer "refused, nothing moved" could be false. The
 * channel stays held (`refund-tx:unknown:<nonce>`) until the chain's refund nonce says a refund
 * landed, and the payer is told 503 PAYMENT_PENDING.
 */
for (const engine of ENGINES) {
  describe(`attack: a facilitator that throws while sending a refund (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    test('thrown after broadcasting: 503 PAYMENT_PENDING, the channel held and serving nothing; the pass records the landed refund once', async () => {
      const h = harness();
      const r = await refundThrown(h, 'after');
      assert.equal(r.first.status, 503, r.first.text);
      assert.equal(r.first.body.error, 'PAYMENT_PENDING', r.first.text);
      const held = (await channelOf(h, r.payer))!;
      assert.equal(held.lease_owner, `refund-tx:unknown:${r.before.refund_nonce}`);
      const spend = await voucherHeader(h, r.payer, (ceiling, charged) => charged + ceiling);
      assert.notEqual((await paid(h, spend.header)).status, 200, 'no request is served on escrow the refund paid back');
      const pass = await claimPass(h, {}, true);
      assert.equal(pass.refunds.length, 1, pass.failures.join('\n'));
      const { transaction, landed } = pass.refunds[0]!;
      assert.equal(landed, true);
      assert.match(transaction, /^0x[0-9a-f]{64}$/, "the refund's transaction, found by its Refunded event");
      const owed = r.before.balance_usdc - r.before.charged_usdc;
      assert.equal(await h.chain.balanceOf(h.chain.usdc, r.payer.address), r.payerUsdc + BigInt(owed));
      const after = (await channelOf(h, r.payer))!;
      assert.equal(after.lease_owner, null, 'the channel is given back');
      assert.deepEqual(await refundsOf(h, after.channel_id), [[owed, transaction]]);
      assert.equal(after.refunded_usdc, owed);
      await assertBooksEqualChain(h);
    });

    test('thrown before broadcasting: 503 PAYMENT_PENDING, nothing sent, the channel held; past its window the pass names it for an operator', async () => {
      const h = harness();
      const r = await refundThrown(h, 'before');
      assert.equal(r.first.status, 503, r.first.text);
      assert.equal(r.first.body.error, 'PAYMENT_PENDING', r.first.text);
      assert.equal(await pooled(h), 0, 'nothing was broadcast');
      const again = await askRefund(h, r.header);
      assert.equal(again.status, 503, again.text);
      assert.equal(again.body.error, 'PAYMENT_PENDING', 'asked again: still pending, never a second refund');
      await expireHold(h, r.before.channel_id);
      const pass = await claimPass(h, {}, true);
      assert.deepEqual(pass.refunds, []);
      assert.equal(pass.failures.filter((f) => f.includes('is not known') && f.includes('stays held')).length, 1, pass.failures.join('\n'));
      const held = (await channelOf(h, r.payer))!;
      assert.equal(held.lease_owner, `refund-tx:unknown:${r.before.refund_nonce}`);
      assert.equal(held.refunded_usdc, 0);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, r.payer.address), r.payerUsdc, 'nothing moved to the payer');
      await assertBooksEqualChain(h);
    });
  });
}
