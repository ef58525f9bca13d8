import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PublicClient } from 'viem';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { settleRefundInFlight } from '../../../src/payments/channels/refund-in-flight.ts';
import { ENGINES } from '../../support/engines.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { channelSuite } from './channel-harness.ts';
import { claimPass, reader, servedChannel } from './claims-setup.ts';
import { assertBooksEqualChain, facilitatorThrowsOnRefund } from './followup-setup.ts';
import { SHORT_WAIT, askRefund, refundsOf, signedRefund } from './review-refund-setup.ts';

/** A reader whose log search the RPC refuses (a provider without eth_getLogs, or one failing it now). */
const withoutLogs = (client: PublicClient): PublicClient =>
  new Proxy(client, {
    get: (target, key, receiver) =>
      key === 'getLogs' ? () => Promise.reject(new Error('eth_getLogs is not served here')) : Reflect.get(target, key, receiver),
  });

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
  const header = await signedRefund(h, account);
  const restore = facilitatorThrowsOnRefund(h, 'after');
  try {
    const first = await askRefund(h, header);
    assert.equal(first.status, 503, first.text);
  } finally {
    restore();
  }
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

    test("the payer's retry and the claim pass resolve the same hold at once, one finding the event and one not: recorded once", async () => {
      const h = harness();
      const r = await landedUnknownRefund(h);
      const db = h.gw.services.storage.db;
      // Both read the row while it was held; one's log search failed (its fallback key), the other's found the event (its hash).
      const [a, b] = await Promise.all([
        settleRefundInFlight(db, withoutLogs(reader(h)), r.held, null, Date.now()),
        settleRefundInFlight(db, reader(h), r.held, null, Date.now()),
      ]);
      assert.equal(a.kind, 'landed');
      assert.equal(b.kind, 'landed');
      await assertRefundedOnce(h, r);
    });

    test('the same race, one after the other on the row both read: the later one records nothing', async () => {
      const h = harness();
      const r = await landedUnknownRefund(h);
      const db = h.gw.services.storage.db;
      await settleRefundInFlight(db, withoutLogs(reader(h)), r.held, null, Date.now());
      await settleRefundInFlight(db, reader(h), r.held, null, Date.now());
      await assertRefundedOnce(h, r);
    });

    test("a pass whose refund read failed still refreshed the held channel's mirror: the next pass, without logs, records the refund in full", async () => {
      const h = harness();
      const r = await landedUnknownRefund(h);
      // settleRefunds' three reads fail; the claim loop's read of the same channel succeeds.
      const flaky = failingFirstReads(reader(h), 3);
      const first = await claimPass(h, { clientFor: () => flaky }, true);
      assert.deepEqual(first.refunds, []);
      assert.equal(first.failures.filter((f) => f.includes('could not be read')).length, 1, first.failures.join('\n'));
      const second = await claimPass(h, { clientFor: () => withoutLogs(reader(h)) }, true);
      assert.equal(second.refunds.length, 1, second.failures.join('\n'));
      await assertRefundedOnce(h, r);
    });
  });
}
