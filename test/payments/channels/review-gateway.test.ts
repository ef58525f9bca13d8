import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { computeChannelId, signVoucher } from '@x402/evm/batch-settlement/client';
import { toClientEvmSigner } from '@x402/evm';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { call } from '../../support/gateway.ts';
import { CHAT_BODY, channelOf, channelOffersOf, channelSuite, openedChannel } from './channel-harness.ts';

/**
 * A fresh reviewer's attacks on the batch-settlement request path. Each BREAK is a `todo` test
 * that asserts the safe behaviour and fails on the code as it is; its message says what happened.
 */

const ZERO_SALT = `0x${'00'.repeat(32)}` as const;

/** The usdc batch-settlement entry of a request's 402. */
async function usdcEntry(h: PayPerRequestHarness, body: unknown): Promise<PaymentRequirements> {
  const asked = await h.chat(body);
  assert.equal(asked.status, 402, asked.text);
  return channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
}

/**
 * The channel config of `victim`'s stock-client channel as a stranger builds it: the victim's
 * public address, the stock client's default salt (zero), the rest from the gateway's own 402.
 */
function strangersConfig(victim: FundedAccount, offer: PaymentRequirements) {
  const extra = offer.extra as { receiverAuthorizer: `0x${string}`; withdrawDelay: number };
  return {
    payer: victim.address,
    payerAuthorizer: victim.address,
    receiver: offer.payTo as `0x${string}`,
    receiverAuthorizer: extra.receiverAuthorizer,
    token: offer.asset as `0x${string}`,
    withdrawDelay: extra.withdrawDelay,
    salt: ZERO_SALT,
  };
}

/** A chat body whose 402 asks a batch-settlement ceiling of exactly `target` micro-USDC (searched by prompt length and max_tokens). */
async function bodyWithCeiling(h: PayPerRequestHarness, target: number) {
  for (let pad = 0; pad < 40; pad++) {
    const body = (max: number) => ({ ...CHAT_BODY, messages: [{ role: 'user' as const, content: `hi${'x'.repeat(pad)}` }], max_tokens: max });
    let [lo, hi] = [1, 4000];
    while (lo <= hi) {
      const mid = Math.floor((lo + hi) / 2);
      const offer = await usdcEntry(h, body(mid));
      const amount = Number(offer.amount);
      if (amount === target) return { body: body(mid), offer };
      if (amount < target) lo = mid + 1;
      else hi = mid - 1;
    }
  }
  throw new Error(`no chat body has a ceiling of ${target}`);
}

for (const engine of ENGINES) {
  describe(`attack: a fresh review of batch-settlement channels (${engine})`, () => {
    const harness = channelSuite(engine);

    test("a stranger's probe (a voucher signed by some other key) gets no corrective 402 with the payer's last voucher signature", {
      todo: 'BREAK: the corrective 402 hands anyone who can name the channel (payer address + default zero salt) its last signed voucher',
    }, async () => {
      const h = harness();
      const victim = await openedChannel(h);
      const offer = await usdcEntry(h, CHAT_BODY);
      const config = strangersConfig(victim, offer);
      const channelId = computeChannelId(config, offer.network);
      const stranger = privateKeyToAccount(generatePrivateKey());
      const voucher = await signVoucher(toClientEvmSigner(stranger), channelId, '1', offer.network);
      const answer = await call(h.gw.url, 'POST', '/v1/chat/completions', CHAT_BODY, {
        'payment-signature': v2Header(offer, { type: 'voucher', channelConfig: config, voucher }),
      });
      assert.equal(answer.status, 402);
      const entry = channelOffersOf(decodePaymentRequiredHeader(answer.headers.get('payment-required')!).accepts)[0]!;
      assert.equal((entry.extra as { voucherState?: unknown }).voucherState, undefined, "the payer's signature went to a stranger");
    });

    test("the payer's last voucher, taken from a corrective 402 by a stranger, does not buy the stranger a request billed to the payer's channel", {
      todo: "BREAK: a stranger replays the leaked voucher with a request whose ceiling is the last request's unspent part; it runs on the payer's channel",
    }, async () => {
      const h = harness();
      const victim = await openedChannel(h);
      const offer = await usdcEntry(h, CHAT_BODY);
      const config = strangersConfig(victim, offer);
      const channelId = computeChannelId(config, offer.network);
      const probe = await signVoucher(toClientEvmSigner(privateKeyToAccount(generatePrivateKey())), channelId, '1', offer.network);
      const answer = await call(h.gw.url, 'POST', '/v1/chat/completions', CHAT_BODY, {
        'payment-signature': v2Header(offer, { type: 'voucher', channelConfig: config, voucher: probe }),
      });
      const extra = channelOffersOf(decodePaymentRequiredHeader(answer.headers.get('payment-required')!).accepts)[0]!.extra as {
        voucherState?: { signedMaxClaimable: string; signature: `0x${string}` };
        channelState: { chargedCumulativeAmount: string };
      };
      if (!extra.voucherState) return; // nothing leaked: nothing to replay
      const before = (await channelOf(h, victim))!;
      const gap = Number(extra.voucherState.signedMaxClaimable) - Number(extra.channelState.chargedCumulativeAmount);
      assert.ok(gap > 0, 'the victim was charged less than its last ceiling (a short answer)');
      const tuned = await bodyWithCeiling(h, gap);
      const calls = h.fake.received.length;
      const stolen = { channelId, maxClaimableAmount: extra.voucherState.signedMaxClaimable, signature: extra.voucherState.signature };
      const served = await call(h.gw.url, 'POST', '/v1/chat/completions', tuned.body, {
        'payment-signature': v2Header(tuned.offer, { type: 'voucher', channelConfig: config, voucher: stolen }),
      });
      const after = (await channelOf(h, victim))!;
      await assertLedgerConsistent(h.gw.services.storage.db);
      assert.notEqual(
        served.status,
        200,
        `a stranger was served (provider calls ${calls} -> ${h.fake.received.length}); the victim's channel charged ${before.charged_usdc} -> ${after.charged_usdc}`,
      );
    });
  });
}
