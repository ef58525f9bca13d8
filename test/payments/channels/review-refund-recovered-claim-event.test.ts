import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PublicClient } from 'viem';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { assertClaimedAsCharged, claimPass, claimsSuite, reader, servedChannel } from './claims-setup.ts';

/**
 * A lost claim's recovery searches the contract's Claimed events for the one that brought the
 * channel to its on-chain totalClaimed. Another channel claimed later to the very same total must
 * not lend it its transaction: the search is filtered by channel id (an indexed topic).
 */
for (const engine of ENGINES) {
  describe(`attack: a Claimed event of another channel with the same total (${engine})`, () => {
    const harness = claimsSuite(engine);

    test('the recovered claim names its own transaction, not a newer claim of another channel to the same total', async () => {
      const h = harness();
      const a = await servedChannel(h);
      let landedA = '';
      const crash = claimPass(
        h,
        {
          afterClaim: (tx) => {
            landedA = tx;
            throw new Error('crashed after the claim landed');
          },
        },
        true,
      );
      await assert.rejects(crash, /crashed after the claim landed/);
      const b = await servedChannel(h);
      assert.equal(b.row.charged_usdc, a.row.charged_usdc, 'both channels are charged the same: their Claimed events carry the same newTotalClaimed');

      // A pass that cannot read A's channel (an RPC hiccup) claims only B, after A's lost claim.
      const client = reader(h);
      const blindToA = {
        ...client,
        readContract: (p: { args?: unknown[] }) =>
          p.args?.[0] === a.row.channel_id ? Promise.reject(new Error('rpc timeout')) : client.readContract(p as Parameters<PublicClient['readContract']>[0]),
      } as unknown as PublicClient;
      const onlyB = await claimPass(h, { clientFor: () => blindToA }, true);
      assert.equal(onlyB.claims.length, 1);
      assert.deepEqual(onlyB.claims[0]!.channels, [b.row.channel_id]);

      const next = await claimPass(h, {}, true);
      assert.deepEqual(next.recovered, [a.row.channel_id]);
      const claimsOfA = await h.gw.services.storage.db
        .selectFrom('channel_transfers')
        .select(['amount_usdc', 'tx_hash'])
        .where('kind', '=', 'claim')
        .where('channel_id', '=', a.row.channel_id)
        .execute();
      assert.deepEqual(
        claimsOfA.map((t) => [Number(t.amount_usdc), t.tx_hash]),
        [[a.row.charged_usdc, landedA.toLowerCase()]],
      );
      assert.notEqual(landedA.toLowerCase(), onlyB.claims[0]!.transaction.toLowerCase());
      assert.equal((await findChannel(h.gw.services.storage.db, a.row.channel_id))!.total_claimed_usdc, a.row.charged_usdc);
      await assertClaimedAsCharged(h, [a.row.channel_id, b.row.channel_id]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
