import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { channelOf, channelSuite, paid, voucherHeader } from './channel-harness.ts';
import { claimPass } from './claims-setup.ts';
import { SHORT_WAIT, askRefund, pendingRefund } from './review-refund-setup.ts';

/**
 * A refund whose transaction the node no longer knows, past its 15 minutes, when the gateway cannot
 * tell that no refund landed since: the channel's refund nonce on chain is not the one the refund
 * spends (a refund landed under a hash the gateway does not know, a replacement), or the hold does
 * not say which nonce it spends (a hold written as `refund-tx:<hash>` alone, as an older gateway did:
 * the case driven here). Freeing the channel could serve requests against escrow paid back; guessing
 * an amount could book a wrong refund. It stays held and every claim pass reports it.
 */
for (const engine of ENGINES) {
  describe(`attack: a refund gone from the node that may have landed under another transaction (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    test('the channel stays held, the payer is told pending, a request is refused, and each claim pass names it', async () => {
      const h = harness();
      const r = await pendingRefund(h);
      try {
        await h.anvil.rpc('anvil_dropTransaction', [r.transaction]);
        await h.gw.services.storage.db
          .updateTable('channels')
          .set({ lease_until: Date.now() - 1, lease_owner: `refund-tx:${r.transaction.toLowerCase()}` })
          .where('channel_id', '=', r.before.channel_id)
          .execute();
        // The pass also tries to claim the channel's charges (mining is paused: that claim fails too, not what this test reads).
        const pass = await claimPass(h, {}, true);
        const named = pass.failures.filter((f) => f.includes(r.transaction) && f.includes('a refund may have landed under another transaction; it stays held'));
        assert.equal(named.length, 1, pass.failures.join('\n'));
        assert.equal((await askRefund(h, r.header)).status, 503, 'the payer is told its refund is still pending');
        const spend = await voucherHeader(h, r.payer, (ceiling, charged) => charged + ceiling);
        assert.notEqual((await paid(h, spend.header)).status, 200, 'no request is served on escrow a refund may have paid back');
        const after = (await channelOf(h, r.payer))!;
        assert.equal(after.lease_owner, `refund-tx:${r.transaction.toLowerCase()}`);
        assert.notEqual(after.last_refund_signature, null, 'its voucher stays spent');
        assert.equal(after.refunded_usdc, 0);
      } finally {
        await r.mine();
      }
    });
  });
}
