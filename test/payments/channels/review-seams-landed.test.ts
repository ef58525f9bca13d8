import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toClientEvmSigner } from '@x402/evm';
import { signVoucher } from '@x402/evm/batch-settlement/client';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { ENGINES } from '../../support/engines.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { call } from '../../support/gateway.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { channelOf, channelOffersOf, channelSuite, paid, voucherHeader } from './channel-harness.ts';
import { payerCalls, reader } from './claims-setup.ts';
import { landedButUnserved, mirroredOnce } from './review-seams-setup.ts';

/**
 * A deposit payload whose deposit landed (its request failed upstream), sent again once the
 * channel has changed under it, with its amount inflated, or racing the next voucher: the payload
 * is only ever its voucher against the channel the contract holds, and no deposit is invented.
 */

const refundHeader = async (h: PayPerRequestHarness, account: FundedAccount, config: Record<string, unknown>, channelId: `0x${string}`) => {
  const probe = await call(h.gw.url, 'GET', '/v1/channels/refund');
  const offer = channelOffersOf(probe.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
  const voucher = await signVoucher(toClientEvmSigner(account), channelId, '0', offer.network);
  return v2Header(offer, { type: 'refund', channelConfig: config, voucher });
};

for (const engine of ENGINES) {
  describe(`attack: a landed deposit's payload sent again (${engine})`, () => {
    const harness = channelSuite(engine);

    test('its amount inflated fifty-fold: served on the voucher against what landed, no deposit invented', async () => {
      const h = harness();
      const { offer, deposit, channelId } = await landedButUnserved(h);
      const inflated = { ...deposit, deposit: { ...deposit.deposit, amount: String(BigInt(deposit.deposit.amount) * 50n) } };
      const answer = await paid(h, v2Header(offer, inflated));
      assert.equal(answer.status, 200, answer.text.slice(0, 300));
      const receipt = JSON.parse(Buffer.from(answer.headers.get('payment-response')!, 'base64').toString());
      assert.equal(receipt.transaction, '', 'no deposit transaction claimed');
      assert.equal(receipt.extra.channelState.balance, deposit.deposit.amount, "the balance is the contract's, not the payload's");
      await mirroredOnce(h, channelId);
    });

    test('after the payer started a timed withdrawal: refused as closing, nothing ran', async () => {
      const h = harness();
      const { account, header, row, channelId, deposit } = await landedButUnserved(h);
      await payerCalls(h, account, row, 'initiateWithdraw', [BigInt(deposit.deposit.amount)]);
      const calls = h.fake.received.length;
      const answer = await paid(h, header);
      assert.equal(answer.status, 402, answer.text.slice(0, 300));
      assert.match(answer.text, /closing/);
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      await mirroredOnce(h, channelId);
    });

    test('after a cooperative refund took the balance back: refused (deposit more), nothing ran, no deposit recorded again', async () => {
      const h = harness();
      const { account, header, channelId, deposit } = await landedButUnserved(h);
      const refunded = await call(h.gw.url, 'GET', '/v1/channels/refund', undefined, {
        'payment-signature': await refundHeader(h, account, deposit.channelConfig, channelId),
      });
      assert.equal(refunded.status, 200, refunded.text);
      assert.equal((await readOnchainChannel(reader(h), channelId)).balance, 0n, 'the refund took the balance back');
      const calls = h.fake.received.length;
      const answer = await paid(h, header);
      assert.equal(answer.status, 402, answer.text.slice(0, 300));
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.equal((await channelOf(h, account))!.charged_usdc, 0);
      await mirroredOnce(h, channelId);
    });

    test('racing the next voucher (both for the same cumulative amount): one is served and charged, one deposit', async () => {
      const h = harness();
      const { account, header, channelId } = await landedButUnserved(h);
      const next = await voucherHeader(h, account, (ceiling, charged) => charged + ceiling);
      const calls = h.fake.received.length;
      h.fake.behaviour = { delayMs: 400 };
      let answers: Awaited<ReturnType<typeof paid>>[];
      try {
        answers = await Promise.all([paid(h, header), paid(h, next.header)]);
      } finally {
        h.fake.behaviour = {};
      }
      assert.deepEqual(answers.map((a) => a.status).sort(), [200, 402], answers.map((a) => a.text.slice(0, 200)).join(' | '));
      assert.equal(h.fake.received.length, calls + 1, 'one request ran');
      const served = answers.find((a) => a.status === 200)!;
      assert.equal((await channelOf(h, account))!.charged_usdc, Number(served.headers.get('x-tollgate-charged-usdc')), 'charged once');
      await mirroredOnce(h, channelId);
    });
  });
}
