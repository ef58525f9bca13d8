import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { channelOf, channelSuite } from './channel-harness.ts';
import { assertClaimedAsCharged, claimPass } from './claims-setup.ts';
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
  });
}
