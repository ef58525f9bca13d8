import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { concatHex, encodeAbiParameters, keccak256, pad, toHex, type Hex } from 'viem';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { ENGINES } from '../../support/engines.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { channelOf, channelSuite, openedChannel } from './channel-harness.ts';
import { claimPass, servedChannel } from './claims-setup.ts';
import { assertBooksEqualChain, facilitatorThrowsOnRefund } from './followup-setup.ts';
import { SHORT_WAIT, askRefund, refundsOf, signedRefund } from './review-refund-setup.ts';

// Runtime code that emits LOG3 with the calldata's first three words as topics and the rest as data:
// a contract anyone can deploy that "emits" any event for any channel id.
const LOG_ANYTHING = '0x606036036060600037604035602035600035606036036000a300';
const FORGER = '0x00000000000000000000000000000000000f0a9e';
const REFUNDED = keccak256(toHex('Refunded(bytes32,address,uint128,uint256)'));

/** Blocks past one log-search range (2,000): what follows is found first by the newest-first search. */
const pastOneRange = (h: PayPerRequestHarness) => h.anvil.rpc('anvil_mine', [toHex(2_001)]);

for (const engine of ENGINES) {
  describe(`attack: a Refunded event that is not the held refund's (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    test("a forged event from another contract, another channel's refund, both newer on the same nonce: the held refund's own is recorded", async () => {
      const h = harness();
      const victim = await openedChannel(h);
      const before = (await channelOf(h, victim))!;
      const owed = before.balance_usdc - before.charged_usdc;
      const restore = facilitatorThrowsOnRefund(h, 'after');
      try {
        assert.equal((await askRefund(h, await signedRefund(h, victim))).status, 503);
      } finally {
        restore();
      }
      await pastOneRange(h);
      // Another channel's refund (nonce 0 too, another amount), through the gateway.
      const { account: other } = await servedChannel(h);
      const otherRefund = await askRefund(h, await signedRefund(h, other));
      assert.equal(otherRefund.status, 200, otherRefund.text);
      assert.notEqual(otherRefund.body.refunded_usdc, owed);
      await pastOneRange(h);
      // A contract at another address "emits" the victim channel's Refunded for nonce 0 paying 1 unit.
      await h.anvil.rpc('anvil_setCode', [FORGER, LOG_ANYTHING]);
      const forged = concatHex([
        REFUNDED,
        before.channel_id as Hex,
        pad(victim.address),
        encodeAbiParameters([{ type: 'uint128' }, { type: 'uint256' }], [1n, 0n]),
      ]);
      const thief = h.chain.client(await h.payer(0n));
      await thief.waitForTransactionReceipt({ hash: await thief.sendTransaction({ to: FORGER, data: forged }) });

      // This pass resolves it, or the gateway's own pass did already (the same code): either way, once.
      const pass = await claimPass(h, {}, true);
      assert.deepEqual(pass.failures, []);
      const recorded = await refundsOf(h, before.channel_id);
      assert.deepEqual(
        recorded.map(([amount]) => amount),
        [owed],
        'the amount the chain paid the victim channel',
      );
      const otherId = (await channelOf(h, other))!.channel_id;
      const otherTx = (await refundsOf(h, otherId))[0]![1];
      assert.notEqual(recorded[0]![1], otherTx, "not the other channel's transaction");
      assert.equal((await findChannel(h.gw.services.storage.db, before.channel_id))!.refunded_usdc, owed);
      await assertBooksEqualChain(h);
    });
  });
}
