import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { computeChannelId } from '@x402/evm/batch-settlement/client';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { channelOf, channelOffersOf, channelSuite, openedChannel, paid, voucherHeader } from './channel-harness.ts';

/**
 * Vouchers the stock client never sends, signed by hand for a channel the stock client opened: each
 * is refused with nothing run and nothing charged, the channel unchanged, ledger-check clean.
 */
async function refusedWithNothingRun(h: PayPerRequestHarness, payer: FundedAccount, send: () => Promise<{ status: number; headers: Headers }>) {
  const before = await channelOf(h, payer);
  const calls = h.fake.received.length;
  const answer = await send();
  assert.notEqual(answer.status, 200);
  assert.equal(h.fake.received.length, calls, 'the provider was never called');
  const after = await channelOf(h, payer);
  assert.equal(after!.charged_usdc, before!.charged_usdc, 'nothing was charged');
  assert.equal(after!.signed_max_usdc, before!.signed_max_usdc);
  await assertLedgerConsistent(h.gw.services.storage.db);
  return answer;
}

const errorOf = (headers: Headers) => decodePaymentRequiredHeader(headers.get('payment-required')!).error;

for (const engine of ENGINES) {
  describe(`attack: batch-settlement vouchers the stock client never sends (${engine})`, () => {
    const harness = channelSuite(engine);

    test('a voucher replayed after its request committed gets the corrective 402 and runs nothing', async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling);
      assert.equal((await paid(h, v.header)).status, 200);
      const answer = await refusedWithNothingRun(h, payer, () => paid(h, v.header));
      assert.equal(answer.status, 402);
      assert.equal(errorOf(answer.headers), 'invalid_batch_settlement_evm_cumulative_amount_mismatch');
      const corrective = channelOffersOf(decodePaymentRequiredHeader(answer.headers.get('payment-required')!).accepts)[0]!;
      const state = (corrective.extra as { channelState?: { chargedCumulativeAmount: string } }).channelState;
      assert.equal(state?.chargedCumulativeAmount, String((await channelOf(h, payer))!.charged_usdc), 'the corrective 402 carries the channel state');
    });

    test('a lowered voucher (one unit below charged + ceiling) is refused', async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling - 1);
      const answer = await refusedWithNothingRun(h, payer, () => paid(h, v.header));
      assert.equal(errorOf(answer.headers), 'invalid_batch_settlement_evm_cumulative_amount_mismatch');
    });

    test('vouchers reordered: the later one sent first is refused, the earlier still runs', async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const first = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling);
      const second = await voucherHeader(h, payer, (ceiling, charged) => charged + 2 * ceiling);
      await refusedWithNothingRun(h, payer, () => paid(h, second.header));
      assert.equal((await paid(h, first.header)).status, 200);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a voucher signed for another channel, sent with this channel config, is a 400 naming the channel id', async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling, { salt: `0x${'77'.repeat(32)}` });
      // The payload names the other channel's id: its config does not hash to it.
      const decoded = JSON.parse(Buffer.from(v.header, 'base64').toString());
      decoded.payload.voucher.channelId = computeChannelId({ ...decoded.payload.channelConfig, salt: `0x${'77'.repeat(32)}` }, v.offer.network);
      const header = Buffer.from(JSON.stringify(decoded)).toString('base64');
      const answer = await refusedWithNothingRun(h, payer, () => paid(h, header));
      assert.equal(answer.status, 400);
      // Its signature, moved onto this channel's id, recovers to nobody the channel names.
      decoded.payload.voucher.channelId = v.channelId;
      const moved = await refusedWithNothingRun(h, payer, () => paid(h, Buffer.from(JSON.stringify(decoded)).toString('base64')));
      assert.equal(moved.status, 402);
    });

    test("a voucher signed by a key other than the channel's payer authorizer is refused", async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling, { signer: privateKeyToAccount(generatePrivateKey()) });
      const answer = await refusedWithNothingRun(h, payer, () => paid(h, v.header));
      assert.equal(answer.status, 402);
    });

    test('two requests at once on one channel: one runs, the other gets the busy 402 with the channel state and runs nothing', async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling);
      const calls = h.fake.received.length;
      h.fake.behaviour = { delayMs: 500 };
      try {
        const [a, b] = await Promise.all([paid(h, v.header), paid(h, v.header)]);
        assert.deepEqual([a.status, b.status].sort(), [200, 402]);
        const refused = a.status === 402 ? a : b;
        assert.equal(errorOf(refused.headers), 'invalid_batch_settlement_evm_channel_busy');
        assert.equal(h.fake.received.length, calls + 1, 'the provider ran one of them');
        const busy = channelOffersOf(decodePaymentRequiredHeader(refused.headers.get('payment-required')!).accepts)[0]!;
        assert.ok((busy.extra as { channelState?: unknown }).channelState, 'the busy 402 carries the channel state');
      } finally {
        h.fake.behaviour = {};
      }
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a provider failure charges nothing and leaves the voucher good for the retry', async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling);
      const before = (await channelOf(h, payer))!;
      h.fake.behaviour = { failStatus: 500 };
      try {
        const failed = await paid(h, v.header);
        assert.ok(failed.status >= 500, failed.text);
      } finally {
        h.fake.behaviour = {};
      }
      const between = (await channelOf(h, payer))!;
      assert.equal(between.charged_usdc, before.charged_usdc, 'nothing charged');
      assert.equal(between.signed_max_usdc, before.signed_max_usdc, 'the voucher was not adopted');
      await assertLedgerConsistent(h.gw.services.storage.db);
      const retried = await paid(h, v.header);
      assert.equal(retried.status, 200, retried.text);
      const after = (await channelOf(h, payer))!;
      assert.equal(after.charged_usdc, before.charged_usdc + Number(retried.headers.get('x-tollgate-charged-usdc')));
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
