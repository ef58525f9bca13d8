import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PublicClient } from 'viem';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { settleRefundInFlight } from '../../../src/payments/channels/refund-in-flight.ts';
import { ENGINES } from '../../support/engines.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { channelSuite } from './channel-harness.ts';
import { claimPass, reader, servedChannel } from './claims-setup.ts';
import { assertBooksEqualChain, assertHeldUnbooked, refundThrownAfterBroadcast, withoutLogs } from './followup-setup.ts';
import { SHORT_WAIT, refundsOf } from './review-refund-setup.ts';

/** A reader whose first `n` contract reads fail (an RPC outage that ends within the pass). */
function failingFirstReads(client: PublicClient, n: number): PublicClient {
  let left = n;
  return new Proxy(client, {
    get: (target, key, receiver) => {
      const real = Reflect.get(target, key, receiver);
      if (key !== 'readContract') return real;
      return (...a: unknown[]) =>
        left-- > 0 ? Promise.reject(new Error('the RPC timed out (test)')) : (real as (...x: unknown[]) => unknown).apply(target, a);
    },
  });
}

/** A served channel (charges not claimed yet) whose refund the facilitator broadcast and then threw: held as refund-tx:unknown, landed on chain. */
async function landedUnknownRefund(h: PayPerRequestHarness) {
  const { account, row: before } = await servedChannel(h);
  const payerUsdc = await h.chain.balanceOf(h.chain.usdc, account.address);
  await refundThrownAfterBroadcast(h, account);
  const held = (await findChannel(h.gw.services.storage.db, before.channel_id))!;
  assert.equal(held.lease_owner, `refund-tx:unknown:${before.refund_nonce}`);
  return { account, before, held, payerUsdc, owed: before.balance_usdc - before.charged_usdc };
}

/** The refund is in the books once, for what the payer received on chain; the mirror equals the contract. */
async function assertRefundedOnce(h: PayPerRequestHarness, r: Awaited<ReturnType<typeof landedUnknownRefund>>): Promise<void> {
  assert.equal(await h.chain.balanceOf(h.chain.usdc, r.account.address), r.payerUsdc + BigInt(r.owed), 'the payer got the rest of its escrow, once');
  const refunds = await refundsOf(h, r.before.channel_id);
  assert.equal(refunds.length, 1, `one refund transfer: ${JSON.stringify(refunds)}`);
  assert.equal(refunds[0]![0], r.owed, 'for the amount the chain paid');
  const after = (await findChannel(h.gw.services.storage.db, r.before.channel_id))!;
  assert.equal(after.refunded_usdc, r.owed, 'refunded_usdc counts it once');
  assert.equal(after.lease_owner, null, 'the channel is given back');
  await assertBooksEqualChain(h);
}

for (const engine of ENGINES) {
  describe(`attack: two resolvers of one held refund, and a mirror refreshed under the hold (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    // The payer's retry and a claim pass read the row while held and resolve it at once: both finding the event, or one
    // whose log search fails (it writes nothing) beside one finding it.
    for (const [name, firstLogs, kinds] of [
      ['both finding the event', true, ['landed', 'landed']],
      ['one finding the event and one whose log search fails', false, ['pending', 'landed']],
    ] as const) {
      test(`two resolvers of the same hold at once, ${name}: recorded once`, async () => {
        const h = harness();
        const r = await landedUnknownRefund(h);
        const db = h.gw.services.storage.db;
        const first = firstLogs ? reader(h) : withoutLogs(reader(h));
        const fates = await Promise.all([first, reader(h)].map((client) => settleRefundInFlight(db, client, r.held, null, Date.now())));
        assert.deepEqual(
          fates.map((f) => f.kind),
          kinds,
        );
        await assertRefundedOnce(h, r);
      });
    }

    test('one after the other on the row both read, the first without its event: held and unbooked, then recorded once', async () => {
      const h = harness();
      const r = await landedUnknownRefund(h);
      const db = h.gw.services.storage.db;
      const first = await settleRefundInFlight(db, withoutLogs(reader(h)), r.held, null, Date.now());
      assert.deepEqual(first, { kind: 'pending', unbooked: { nonce: String(r.before.refund_nonce), searchFailure: 'eth_getLogs is not served here' } });
      await assertHeldUnbooked(h, r.before.channel_id);
      await settleRefundInFlight(db, reader(h), r.held, null, Date.now());
      await assertRefundedOnce(h, r);
    });

    test('a pass whose refund read failed, then one without logs: held, nothing booked; the next pass with logs records the refund in full', async () => {
      const h = harness();
      const r = await landedUnknownRefund(h);
      // settleRefunds' three reads fail; the claim loop's read of the same channel succeeds.
      const flaky = failingFirstReads(reader(h), 3);
      const first = await claimPass(h, { clientFor: () => flaky }, true);
      assert.deepEqual(first.refunds, []);
      assert.equal(first.failures.filter((f) => f.includes('could not be read')).length, 1, first.failures.join('\n'));
      const second = await claimPass(h, { clientFor: () => withoutLogs(reader(h)) }, true);
      assert.deepEqual(second.refunds, [], second.failures.join('\n'));
      assert.equal(second.unresolved.length, 1);
      await assertHeldUnbooked(h, r.before.channel_id);
      const third = await claimPass(h, {}, true);
      assert.equal(third.refunds.length, 1, third.failures.join('\n'));
      await assertRefundedOnce(h, r);
    });
  });
}
