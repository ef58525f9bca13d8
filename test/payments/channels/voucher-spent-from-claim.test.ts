import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { computeChannelId, signVoucher } from '@x402/evm/batch-settlement/client';
import { decodeFunctionData, type Abi, type Hex } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { call } from '../../support/gateway.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { CHAT_BODY, channelOf, channelOffersOf, channelPayer, openedChannel } from './channel-harness.ts';
import { claimPass, claimsSuite, reader } from './claims-setup.ts';

/**
 * The channel analogue of the exact payment rebuilt from its settle calldata (replay-from-chain.test.ts):
 * a batch-settlement voucher is not bound to the request it was signed for, and a request charged
 * less than its ceiling leaves the voucher's headroom (ceiling − charge) spendable. Everything a
 * voucher payload holds (the channel config, the channel id, maxClaimableAmount and the payer's
 * signature) is public once the receiver claims it on chain (x402BatchSettlement's
 * claimWithSignature calldata carries the
 * voucher with its channel config, its signature and the total claimed). An observer who asks the
 * gateway's free 402s for a request whose ceiling is exactly that headroom runs its own prompt on
 * the payer's channel, charged to the payer.
 */

const bodyOf = (max_tokens: number, pad: number) => ({
  ...CHAT_BODY,
  messages: [{ role: 'user' as const, content: `the observer's own prompt${' a'.repeat(pad % 8)}${'.'.repeat(Math.floor(pad / 8))}${'é'.repeat(pad % 3)}` }],
  max_tokens,
});

async function usdcOffer(h: PayPerRequestHarness, body: unknown): Promise<PaymentRequirements> {
  const asked = await h.chat(body);
  assert.equal(asked.status, 402);
  return channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
}

/** What the observer does with the free 402s: a request whose ceiling is exactly `target`. */
async function requestCosting(h: PayPerRequestHarness, target: number): Promise<{ body: unknown; offer: PaymentRequirements } | undefined> {
  for (let pad = 0; pad < 60; pad++) {
    let [lo, hi] = [1, 4000];
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if (Number((await usdcOffer(h, bodyOf(mid, pad))).amount) < target) lo = mid + 1;
      else hi = mid;
    }
    const body = bodyOf(lo, pad);
    const offer = await usdcOffer(h, body);
    if (Number(offer.amount) === target) return { body, offer };
  }
  return undefined;
}

for (const engine of ENGINES) {
  describe(`attack: a batch-settlement voucher's unused headroom spent by someone else (${engine})`, () => {
    const harness = claimsSuite(engine);

    test("an observer holding the payer's last voucher runs its own request on the payer's channel", async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const db = h.gw.services.storage.db;

      // The payer's own request, with a generous max_tokens: its ceiling is far above what it is charged.
      const payerBody = { ...CHAT_BODY, max_tokens: 2000 };
      const offer = await usdcOffer(h, payerBody);
      const config = channelPayer(h, payer).scheme.buildChannelConfig(offer);
      const before = (await channelOf(h, payer))!;
      const maxClaimable = before.charged_usdc + Number(offer.amount);
      const voucher = await signVoucher(toClientEvmSigner(payer), before.channel_id as `0x${string}`, String(maxClaimable), offer.network);
      const own = await call(h.gw.url, 'POST', '/v1/chat/completions', payerBody, {
        'payment-signature': v2Header(offer, { type: 'voucher', channelConfig: config, voucher }),
      });
      assert.equal(own.status, 200, own.text);
      const afterOwn = (await channelOf(h, payer))!;
      const headroom = maxClaimable - afterOwn.charged_usdc;
      assert.ok(headroom > 0, 'the payer was charged less than the ceiling it signed for');
      await assertLedgerConsistent(db);

      // The background claimer claims what was charged, with the payer's latest voucher: on chain.
      const claimed = await claimPass(h, { now: () => Date.now() + 3_601_000 });
      assert.equal(claimed.claims.length, 1, claimed.failures.join('; '));

      // The observer reads the claim transaction: the channel config, maxClaimableAmount, the payer's
      // signature and the total claimed (what the channel was charged). No secret of the payer's.
      const tx = await reader(h).getTransaction({ hash: claimed.claims[0]!.transaction as Hex });
      const { args } = decodeFunctionData({ abi: artifacts.StandInBatchSettlement.abi as Abi, data: tx.input });
      const [claims] = args as unknown as [
        { voucher: { channel: Record<string, unknown>; maxClaimableAmount: bigint }; signature: Hex; totalClaimed: bigint }[],
      ];
      const onChain = claims[0]!;
      const channelConfig = { ...onChain.voucher.channel, withdrawDelay: Number(onChain.voucher.channel.withdrawDelay) } as typeof config;
      const fromChain = {
        channelId: computeChannelId(channelConfig, offer.network),
        maxClaimableAmount: String(onChain.voucher.maxClaimableAmount),
        signature: onChain.signature,
      };
      assert.equal(fromChain.channelId.toLowerCase(), before.channel_id.toLowerCase());
      // A request of its own, priced by the gateway's free 402s to exactly maxClaimable − claimed.
      const found = await requestCosting(h, Number(onChain.voucher.maxClaimableAmount - onChain.totalClaimed));
      assert.ok(found, `the observer found a request whose ceiling is ${headroom}`);
      const calls = h.fake.received.length;
      const observer = await call(h.gw.url, 'POST', '/v1/chat/completions', found.body, {
        'payment-signature': v2Header(found.offer, { type: 'voucher', channelConfig, voucher: fromChain }),
      });
      const afterObserver = (await channelOf(h, payer))!;
      await assertLedgerConsistent(db);
      assert.notEqual(
        observer.status,
        200,
        `the observer's request ran on the payer's channel: charged ${afterObserver.charged_usdc - afterOwn.charged_usdc} micro-USDC to the payer`,
      );
      assert.equal(h.fake.received.length, calls, 'the provider never ran the observer prompt');
      assert.equal(afterObserver.charged_usdc, afterOwn.charged_usdc, "nothing more charged to the payer's channel");
    });
  });
}
