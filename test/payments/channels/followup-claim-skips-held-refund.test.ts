import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { channelOf, channelSuite } from './channel-harness.ts';
import { assertClaimedAsCharged, claimPass, payerCalls, reader, servedChannel } from './claims-setup.ts';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import type { Hex } from 'viem';
import { assertBooksEqualChain, expireHold, pooled } from './followup-setup.ts';
import { SHORT_WAIT, pendingRefund } from './review-refund-setup.ts';

/**
 * A channel held for a cooperative refund in flight (`refund-tx:<hash>:<nonce>`) has claimable
 * charges, and its refund carries the claim of them: a claim sent beside it is gas spent for
 * nothing, racing the refund on chain. The pass leaves it alone until the refund's fate is read.
 */
for (const engine of ENGINES) {
  describe(`attack: the claim pass and a channel held for a refund in flight (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    test('no claim transaction is sent for the held channel; once the refund is found dropped, the same pass claims it', async () => {
      const h = harness();
      const r = await pendingRefund(h);
      try {
        assert.equal(await pooled(h), 1, 'the refund waits in the pool');
        const during = await claimPass(h, {}, true);
        assert.deepEqual(during.claims, [], during.failures.join('\n'));
        assert.equal(await pooled(h), 1, 'no claim transaction joined the refund in the pool');
        assert.equal((await channelOf(h, r.payer))!.lease_owner?.startsWith('refund-tx:'), true, 'still held');

        await h.anvil.rpc('anvil_dropTransaction', [r.transaction]);
        await expireHold(h, r.before.channel_id);
        await r.mine();
        const after = await claimPass(h, {}, true);
        assert.deepEqual(after.refunds, [{ channel: r.before.channel_id, transaction: r.transaction, landed: false }]);
        assert.deepEqual(
          after.claims.map((c) => c.channels),
          [[r.before.channel_id]],
          after.failures.join('\n'),
        );
        await assertClaimedAsCharged(h, [r.before.channel_id]);
        await assertBooksEqualChain(h);
      } finally {
        await r.mine();
      }
    });

    test("a timed withdrawal under way overrides the hold: its completion is the charges' deadline, so they are claimed", async () => {
      const h = harness();
      const { account, row } = await servedChannel(h);
      const db = h.gw.services.storage.db;
      // Held for a refund not mined yet (its hash unknown to the node, its nonce unmoved, its window running).
      const hold = `refund-tx:0x${'ab'.repeat(32)}:${row.refund_nonce}`;
      await db
        .updateTable('channels')
        .set({ lease_owner: hold, lease_until: Date.now() + 600_000 })
        .where('channel_id', '=', row.channel_id)
        .execute();
      assert.deepEqual((await claimPass(h, {}, true)).claims, [], 'held, no withdrawal: not claimed');
      const chain = await readOnchainChannel(reader(h), row.channel_id as Hex);
      await payerCalls(h, account, row, 'initiateWithdraw', [chain.balance - chain.totalClaimed]);
      const pass = await claimPass(h);
      assert.deepEqual(
        pass.claims.map((c) => c.channels),
        [[row.channel_id]],
        pass.failures.join('\n'),
      );
      await assertClaimedAsCharged(h, [row.channel_id]);
      await db.updateTable('channels').set({ lease_owner: null, lease_until: null }).where('channel_id', '=', row.channel_id).execute();
      await assertBooksEqualChain(h);
    });
  });
}
