import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { signVoucher } from '@x402/evm/batch-settlement/client';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { call } from '../../support/gateway.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { CHAT_BODY, channelOf, channelOffersOf, channelPayer, channelSuite, paid, voucherHeader } from './channel-harness.ts';
import { payerCalls, reader } from './claims-setup.ts';

/**
 * A deposit payload whose deposit landed (its request failed upstream), sent again once the
 * channel has changed under it, with its amount inflated, or racing the next voucher: the payload
 * is only ever its voucher against the channel the contract holds, and no deposit is invented.
 */

interface Deposit {
  type: 'deposit';
  channelConfig: Record<string, unknown>;
  voucher: { channelId: `0x${string}`; maxClaimableAmount: string; signature: `0x${string}` };
  deposit: { amount: string; authorization: unknown };
}

/** The stock client's first payment on a new channel, sent once while the provider fails: its deposit landed, nothing charged. */
async function landedButUnserved(h: PayPerRequestHarness) {
  const account = await h.payer(10n);
  const asked = await h.chat(CHAT_BODY);
  const offer = channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase()) as PaymentRequirements;
  const deposit = (await channelPayer(h, account).scheme.createPaymentPayload(2, offer)).payload as unknown as Deposit;
  const header = v2Header(offer, deposit);
  h.fake.behaviour = { failStatus: 500 };
  try {
    assert.ok((await paid(h, header)).status >= 500);
  } finally {
    h.fake.behaviour = {};
  }
  const row = (await channelOf(h, account))!;
  assert.equal(row.charged_usdc, 0);
  return { account, offer, deposit, header, row, channelId: deposit.voucher.channelId };
}

/** One deposit recorded, the contract's balance mirrored, charged within it, and the ledger consistent. */
async function mirroredOnce(h: PayPerRequestHarness, channelId: `0x${string}`) {
  const db = h.gw.services.storage.db;
  const deposits = await db.selectFrom('channel_transfers').select('amount_usdc').where('channel_id', '=', channelId).where('kind', '=', 'deposit').execute();
  assert.equal(deposits.length, 1, 'one deposit recorded');
  const chain = await readOnchainChannel(reader(h), channelId);
  const row = (await db.selectFrom('channels').select(['balance_usdc', 'charged_usdc']).where('channel_id', '=', channelId).executeTakeFirst())!;
  assert.equal(Number(row.balance_usdc), Number(chain.balance), 'the mirror equals the chain');
  assert.ok(Number(row.charged_usdc) <= Number(chain.balance), 'charged within what the channel holds');
  await assertLedgerConsistent(db);
}

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
