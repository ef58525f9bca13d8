import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PublicClient } from 'viem';
import { auditChannelsOnChain } from '../../../src/payments/channels/channel-audit.ts';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { CHANNEL_CONFIG, channelOf, channelSuite, openedChannel, paid, voucherHeader } from './channel-harness.ts';
import { claimPass } from './claims-setup.ts';
import { signedRefund } from './review-refund-setup.ts';

/**
 * A cooperative refund sent by the facilitator whose receipt it stopped waiting for (anvil's mining
 * paused past topup.settleWaitSeconds): the payer gets a pending answer naming the transaction, the
 * channel takes no request until the refund's receipt is read (a request served meanwhile would be
 * charged against escrow the refund pays back), and the row catches up once it is mined, through
 * the payer's retry or the next claim pass. Refunded once, on chain and in the books.
 */

const audited = (h: PayPerRequestHarness) =>
  auditChannelsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network) as PublicClient);
const refundAt = (h: PayPerRequestHarness, header: string) => call(h.gw.url, 'GET', '/v1/channels/refund', undefined, { 'payment-signature': header });

/** The refund of `payer`'s channel sent with mining paused, so the gateway's receipt wait (2 s here) runs out: its answer and the channel before it. */
async function refundLeftPending(h: PayPerRequestHarness) {
  const payer = await openedChannel(h);
  const before = (await channelOf(h, payer))!;
  const payerUsdc = await h.chain.balanceOf(h.chain.usdc, payer.address);
  const header = await signedRefund(h, payer);
  await h.anvil.rpc('evm_setAutomine', [false]);
  const first = await refundAt(h, header);
  return { payer, before, payerUsdc, header, first, mine: () => h.anvil.rpc('evm_setAutomine', [true]).then(() => h.anvil.rpc('evm_mine', [])) };
}

/** The channel after its refund landed: refunded once (to the payer on chain, in the row and its transfers), the mirror equal to the chain, the channel free. */
async function assertRefundedOnce(h: PayPerRequestHarness, r: Awaited<ReturnType<typeof refundLeftPending>>, transaction: string) {
  const owed = r.before.balance_usdc - r.before.charged_usdc;
  const after = (await channelOf(h, r.payer))!;
  assert.equal(after.refunded_usdc, owed, 'the refund is recorded once');
  assert.equal(after.balance_usdc, r.before.charged_usdc, 'the mirror shows what the refund left: what was charged');
  assert.equal(after.total_claimed_usdc, r.before.charged_usdc, 'and the claim of every charge the refund carried');
  assert.equal(after.lease_owner, null, 'the channel is given back');
  assert.equal(await h.chain.balanceOf(h.chain.usdc, r.payer.address), r.payerUsdc + BigInt(owed), 'the payer got the rest of its escrow, once');
  const refunds = await h.gw.services.storage.db
    .selectFrom('channel_transfers')
    .select(['amount_usdc', 'tx_hash'])
    .where('kind', '=', 'refund')
    .where('channel_id', '=', after.channel_id)
    .execute();
  assert.deepEqual(
    refunds.map((t) => [Number(t.amount_usdc), t.tx_hash]),
    [[owed, transaction.toLowerCase()]],
  );
  assert.deepEqual((await audited(h)).problems, [], 'ledger-check --chain: the mirror equals the contract');
  await assertLedgerConsistent(h.gw.services.storage.db);
}

for (const engine of ENGINES) {
  describe(`attack: a cooperative refund whose receipt wait timed out (${engine})`, () => {
    const harness = channelSuite(engine, { ...CHANNEL_CONFIG, topup: { settleWaitSeconds: 2 } });

    test('the payer is told it is pending, the channel takes no request meanwhile, and the same payload sent again once mined gets the receipt', async () => {
      const h = harness();
      const r = await refundLeftPending(h);
      let transaction = '';
      try {
        assert.equal(r.first.status, 503, r.first.text);
        assert.equal(r.first.body.error, 'PAYMENT_PENDING', r.first.text);
        transaction = r.first.body.transaction;
        assert.match(transaction, /^0x[0-9a-f]{64}$/, 'the answer names the refund transaction');
        const again = await refundAt(h, r.header);
        assert.equal(again.status, 503, again.text);
        assert.equal(again.body.transaction, transaction, 'asked again unmined: the same transaction, no second refund');
        // The payer (or anyone holding its voucher) tries to spend the escrow the refund is paying back.
        const spend = await voucherHeader(h, r.payer, (ceiling, charged) => charged + ceiling);
        const served = await paid(h, spend.header);
        assert.notEqual(served.status, 200, `a request was served while the refund was in flight: ${served.text}`);
        assert.equal((await channelOf(h, r.payer))!.charged_usdc, r.before.charged_usdc, 'nothing was charged to the channel meanwhile');
      } finally {
        await r.mine();
      }
      const done = await refundAt(h, r.header);
      assert.equal(done.status, 200, done.text);
      assert.equal(done.body.transaction, transaction);
      assert.equal(done.body.refunded_usdc, r.before.balance_usdc - r.before.charged_usdc);
      await assertRefundedOnce(h, r, transaction);
    });

    test('nobody asks again: the next claim pass brings the row up to the mined refund and gives the channel back', async () => {
      const h = harness();
      const r = await refundLeftPending(h);
      await r.mine();
      assert.equal(r.first.status, 503, r.first.text);
      const pass = await claimPass(h, {}, true);
      assert.deepEqual(
        pass.refunds.filter((f) => f.channel === r.before.channel_id),
        [{ channel: r.before.channel_id, transaction: r.first.body.transaction, landed: true }],
      );
      assert.deepEqual(pass.recovered, [], "the refund's claim is the refund's, mirrored with it, not a lost claim");
      await assertRefundedOnce(h, r, r.first.body.transaction);
    });
  });
}
