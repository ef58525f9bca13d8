import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { CHAT_BODY, channelOf, channelPayer, channelSuite, paid } from './channel-harness.ts';
import { landedButUnserved, usdcChannelOffer } from './review-seams-setup.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme } from '@x402/evm/batch-settlement/client';

/**
 * The payer's rate-limit window counted between the facilitator's verify and the deposit's settle
 * (a deposit) or after the voucher's checks (a voucher): each channel request is counted once,
 * whichever way it is paid, and a landed deposit's payload sent again over the window moves nothing.
 */

const PER_MINUTE = 3;

const chat = (payer: ReturnType<typeof channelPayer>, h: PayPerRequestHarness) =>
  payer.fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(CHAT_BODY) });

/** What is left of `payer`'s chat window, read by spending one more of it. */
async function leftAfterOneMore(h: PayPerRequestHarness, payer: FundedAccount): Promise<number> {
  const { limiter, rateWindows, now } = h.gw.services;
  const hit = await limiter.hit(`chat:${payer.address.toLowerCase()}`, rateWindows.chat, now());
  return hit.allowed ? hit.remaining : -1;
}

for (const engine of ENGINES) {
  describe(`attack: channel requests counted against the payer's rate limit (${engine})`, () => {
    const harness = channelSuite(engine, { rateLimits: { chat: { perMinute: PER_MINUTE, perDay: 1000 } } });

    test('a channel opened by a deposit request and paid on by vouchers: each request counted once, the one past the window a 429', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      for (let i = 0; i < PER_MINUTE; i++) {
        const served = await chat(payer, h);
        assert.equal(served.status, 200, `request ${i + 1} of ${PER_MINUTE}: ${(await served.text()).slice(0, 200)}`);
      }
      const over = await chat(payer, h);
      assert.equal(over.status, 429, (await over.text()).slice(0, 200));
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test("a landed deposit's payload sent again is counted once, as its voucher", async () => {
      const h = harness();
      const { account, header } = await landedButUnserved(h);
      const served = await paid(h, header);
      assert.equal(served.status, 200, served.text.slice(0, 200));
      assert.equal(await leftAfterOneMore(h, account), 0, 'two requests and this one: the window of three is full, nothing counted twice');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test("a landed deposit's payload sent again over the window is a 429 that runs, charges and moves nothing", async () => {
      const h = harness();
      const { account, header } = await landedButUnserved(h);
      while ((await leftAfterOneMore(h, account)) >= 0);
      const row = (await channelOf(h, account))!;
      const onChain = await h.chain.balanceOf(h.chain.usdc, account.address);
      const calls = h.fake.received.length;
      const again = await paid(h, header);
      assert.equal(again.status, 429, again.text.slice(0, 200));
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), onChain, "the payer's tokens did not move");
      const after = (await channelOf(h, account))!;
      assert.equal(after.charged_usdc, row.charged_usdc, 'nothing charged');
      assert.equal(after.lease_owner, null, 'the channel was let go');
      const deposits = await h.gw.services.storage.db.selectFrom('channel_transfers').select('id').where('channel_id', '=', row.channel_id).execute();
      assert.equal(deposits.length, 1, 'one deposit');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a payer over its window sending deposit payloads of fresh salts: each a 429, and no channel recorded for any', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const offer = await usdcChannelOffer(h);
      while ((await leftAfterOneMore(h, account)) >= 0);
      for (let i = 1; i <= 3; i++) {
        const salt = `0x${i.toString(16).padStart(64, '0')}` as const;
        const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(account, h.chain.client(account)), { salt });
        const answer = await paid(h, v2Header(offer, (await scheme.createPaymentPayload(2, offer)).payload));
        assert.equal(answer.status, 429, answer.text.slice(0, 200));
      }
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), 10_000_000n, 'no deposit made');
      await assertLedgerConsistent(h.gw.services.storage.db);
      const rows = await h.gw.services.storage.db.selectFrom('channels').select('channel_id').where('payer', '=', account.address.toLowerCase()).execute();
      assert.equal(rows.length, 0, `${rows.length} channels recorded that were never funded`);
    });
  });
}
