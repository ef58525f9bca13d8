import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Hex } from 'viem';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { settleRefundInFlight } from '../../../src/payments/channels/refund-in-flight.ts';
import { ENGINES } from '../../support/engines.ts';
import { channelSuite } from './channel-harness.ts';
import { claimPass, reader } from './claims-setup.ts';
import { SHORT_WAIT, askRefund, assertRefundRecordedOnce, pendingRefund } from './review-refund-setup.ts';

/** An unconfirmed refund, once mined, finished by several writers at once: it must be recorded once. */
for (const engine of ENGINES) {
  describe(`attack: an in-flight refund finished by racing writers (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    test("the payer's retry and a claim pass reading the mined refund at once record it once", async () => {
      const h = harness();
      const r = await pendingRefund(h);
      await r.mine();
      const [retry, pass] = await Promise.all([askRefund(h, r.header), claimPass(h, {}, true)]);
      assert.ok([200, 503].includes(retry.status) || retry.status < 500, retry.text);
      assert.equal(pass.failures.length, 0, pass.failures.join('; '));
      await assertRefundRecordedOnce(h, r);
    });

    test('two instances finishing the same mined refund from the same row read record it once', async () => {
      const h = harness();
      const r = await pendingRefund(h);
      await r.mine();
      const db = h.gw.services.storage.db;
      const row = (await findChannel(db, r.before.channel_id))!;
      const fates = await Promise.all([1, 2, 3].map(() => settleRefundInFlight(db, reader(h), row, r.transaction as Hex, Date.now())));
      assert.deepEqual(
        fates.map((f) => f.kind),
        ['landed', 'landed', 'landed'],
      );
      await assertRefundRecordedOnce(h, r);
    });

    test('an instance that crashed after recording the mined refund but before giving the channel back: the next pass records nothing twice', async () => {
      const h = harness();
      const r = await pendingRefund(h);
      await r.mine();
      const db = h.gw.services.storage.db;
      const held = (await findChannel(db, r.before.channel_id))!;
      assert.equal((await settleRefundInFlight(db, reader(h), held, r.transaction as Hex, Date.now())).kind, 'landed');
      // The crash: its lease drop never ran, so the channel is still held for the refund.
      await db
        .updateTable('channels')
        .set({ lease_owner: held.lease_owner, lease_until: held.lease_until })
        .where('channel_id', '=', held.channel_id)
        .execute();
      const pass = await claimPass(h, {}, true);
      assert.deepEqual(
        pass.refunds.map((f) => f.landed),
        [true],
      );
      await assertRefundRecordedOnce(h, r);
    });

    test('a claim pass that runs while the refund is unmined, then both mine: the refund is recorded once and the books equal the chain', async () => {
      const h = harness();
      const r = await pendingRefund(h);
      const racing = claimPass(h, {}, true);
      await new Promise((resolve) => setTimeout(resolve, 500));
      await r.mine();
      const during = await racing;
      const next = await claimPass(h, {}, true);
      assert.ok(during.refunds.length + next.refunds.length >= 1, 'a pass finished the refund');
      const after = (await findChannel(h.gw.services.storage.db, r.before.channel_id))!;
      assert.equal(after.lease_owner, null, 'the channel is given back');
      await assertRefundRecordedOnce(h, r);
    });
  });
}
