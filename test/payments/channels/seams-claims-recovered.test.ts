import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Hex, PublicClient } from 'viem';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { recoveredClaimMarker } from '../../../src/payments/channels/claims/claim-recovery.ts';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { assertClaimedAsCharged, claimPass, claimsSuite, reader, servedChannel } from './claims-setup.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

/**
 * A claim that landed on chain while the claimer crashed before recording it: the next pass finds
 * the chain's totalClaimed above the row's, sends no second claim for it, and records it in the
 * channel's transfer history (claims/claim-recovery.ts) with the transaction that made it.
 */
const claimsOf = async (h: PayPerRequestHarness, channelId: string) =>
  (
    await h.gw.services.storage.db
      .selectFrom('channel_transfers')
      .select(['amount_usdc', 'tx_hash'])
      .where('kind', '=', 'claim')
      .where('channel_id', '=', channelId)
      .orderBy('id')
      .execute()
  ).map((t) => ({ amount: Number(t.amount_usdc), tx: t.tx_hash }));

/** A pass that crashes once its claim landed, before any row is updated; the landed transaction. */
async function crashAfterClaim(h: PayPerRequestHarness): Promise<string> {
  let landed = '';
  const crash = claimPass(
    h,
    {
      afterClaim: (tx) => {
        landed = tx;
        throw new Error('crashed after the claim landed');
      },
    },
    true,
  );
  await assert.rejects(crash, /crashed after the claim landed/);
  assert.match(landed, /^0x[0-9a-f]{64}$/);
  return landed;
}

for (const engine of ENGINES) {
  describe(`attack: a claim recovered after a crash is in the transfer history (${engine})`, () => {
    const harness = claimsSuite(engine);

    test('the recovered claim is recorded with its transaction, then only the charges served since are claimed', async () => {
      const h = harness();
      const { row, chat } = await servedChannel(h);
      const landed = await crashAfterClaim(h);
      assert.deepEqual(await claimsOf(h, row.channel_id), [], 'the crash left no trace of the claim in the database');
      await chat();
      const charged = (await findChannel(h.gw.services.storage.db, row.channel_id))!.charged_usdc;
      assert.ok(charged > row.charged_usdc, 'a request was served after the crash');

      const next = await claimPass(h, {}, true);
      assert.deepEqual(next.recovered, [row.channel_id]);
      assert.equal(next.claims.length, 1, 'one claim, for the rest');
      const history = await claimsOf(h, row.channel_id);
      assert.deepEqual(history, [
        { amount: row.charged_usdc, tx: landed },
        { amount: charged, tx: next.claims[0]!.transaction.toLowerCase() },
      ]);
      const again = await claimPass(h, {}, true);
      assert.deepEqual([again.recovered, again.claims], [[], []], 'recorded once');
      assert.equal((await claimsOf(h, row.channel_id)).length, 2);
      await assertClaimedAsCharged(h, [row.channel_id]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('an RPC that refuses the log search: the recovered claim is still recorded, marked recovered', async () => {
      const h = harness();
      const { row } = await servedChannel(h);
      await crashAfterClaim(h);
      const client = reader(h);
      const noLogs = {
        ...client,
        getLogs: async () => {
          throw new Error('eth_getLogs is limited to a 10 block range');
        },
      } as unknown as PublicClient;
      const next = await claimPass(h, { clientFor: () => noLogs }, true);
      assert.deepEqual([next.recovered, next.claims], [[row.channel_id], []]);
      const totalClaimed = (await readOnchainChannel(client, row.channel_id as Hex)).totalClaimed;
      assert.deepEqual(await claimsOf(h, row.channel_id), [{ amount: row.charged_usdc, tx: recoveredClaimMarker(totalClaimed) }]);
      await assertClaimedAsCharged(h, [row.channel_id]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
