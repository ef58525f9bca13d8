import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { computeChannelId, signVoucher } from '@x402/evm/batch-settlement/client';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { CHAT_BODY, channelOf, channelOffersOf, channelPayer, channelSuite, paid } from './channel-harness.ts';
import { reader } from './claims-setup.ts';

/**
 * A deposit authorization (EIP-3009 receiveWithAuthorization through the collector) used more
 * than once through the gateway: sent again, sent twice at once, moved onto another channel, and
 * sent again after its request failed. The channel is deposited into once, every refusal is a
 * clear 4xx, and no money appears that the chain does not hold.
 */

interface DepositPayload {
  type: 'deposit';
  channelConfig: Record<string, unknown> & { salt: `0x${string}` };
  voucher: { channelId: `0x${string}`; maxClaimableAmount: string; signature: `0x${string}` };
  deposit: { amount: string; authorization: unknown };
}

/** The stock client's first payment on a new channel (a deposit with its first voucher), built but not sent. */
async function depositPayload(h: PayPerRequestHarness, account: FundedAccount) {
  const asked = await h.chat(CHAT_BODY);
  const offer = channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase()) as PaymentRequirements;
  const { payload } = await channelPayer(h, account).scheme.createPaymentPayload(2, offer);
  const deposit = payload as unknown as DepositPayload;
  assert.equal(deposit.type, 'deposit');
  return { offer, deposit, header: v2Header(offer, deposit) };
}

const depositsOf = async (h: PayPerRequestHarness, channelId: string) =>
  (
    await h.gw.services.storage.db
      .selectFrom('channel_transfers')
      .select('amount_usdc')
      .where('channel_id', '=', channelId)
      .where('kind', '=', 'deposit')
      .execute()
  ).map((d) => Number(d.amount_usdc));

/** The channel holds on chain exactly what the gateway recorded as deposited, and that is one deposit of `amount`. */
async function depositedOnce(h: PayPerRequestHarness, channelId: `0x${string}`, amount: string) {
  assert.deepEqual(await depositsOf(h, channelId), [Number(amount)], 'one deposit recorded');
  const onChain = await readOnchainChannel(reader(h), channelId);
  assert.equal(onChain.balance, BigInt(amount), 'the contract holds one deposit');
  const row = (await h.gw.services.storage.db.selectFrom('channels').select(['balance_usdc']).where('channel_id', '=', channelId).executeTakeFirst())!;
  assert.equal(Number(row.balance_usdc), Number(amount), 'the mirror says the same');
  await assertLedgerConsistent(h.gw.services.storage.db);
}

for (const engine of ENGINES) {
  describe(`attack: a deposit authorization used again through the gateway (${engine})`, () => {
    const harness = channelSuite(engine);

    test('the same deposit payload sent again after it was served runs nothing and deposits nothing', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const { deposit, header } = await depositPayload(h, account);
      const first = await paid(h, header);
      assert.equal(first.status, 200, first.text);
      const calls = h.fake.received.length;
      const again = await paid(h, header);
      assert.equal(again.status, 402, again.text.slice(0, 300));
      assert.equal(again.body.error, 'invalid_batch_settlement_evm_cumulative_amount_mismatch');
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      await depositedOnce(h, deposit.voucher.channelId, deposit.deposit.amount);
    });

    test('the same deposit payload sent twice at once on a new channel: one is served, the other is told the channel is busy, one deposit', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const { deposit, header } = await depositPayload(h, account);
      const calls = h.fake.received.length;
      h.fake.behaviour = { delayMs: 400 };
      let answers: Awaited<ReturnType<typeof paid>>[];
      try {
        answers = await Promise.all([paid(h, header), paid(h, header)]);
      } finally {
        h.fake.behaviour = {};
      }
      assert.deepEqual(answers.map((a) => a.status).sort(), [200, 402], answers.map((a) => a.text.slice(0, 200)).join(' | '));
      const refused = answers.find((a) => a.status === 402)!;
      assert.equal(refused.body.error, 'invalid_batch_settlement_evm_channel_busy');
      assert.equal(h.fake.received.length, calls + 1, 'one request ran');
      await depositedOnce(h, deposit.voucher.channelId, deposit.deposit.amount);
    });

    test('a deposit authorization moved onto another channel is refused, nothing deposited; its own channel takes it once', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const { offer, deposit, header } = await depositPayload(h, account);
      const channelConfig = { ...deposit.channelConfig, salt: `0x${'42'.repeat(32)}` as const };
      const otherId = computeChannelId(channelConfig as unknown as Parameters<typeof computeChannelId>[0], offer.network);
      const voucher = await signVoucher(toClientEvmSigner(account), otherId, deposit.voucher.maxClaimableAmount, offer.network);
      const moved = await paid(h, v2Header(offer, { ...deposit, channelConfig, voucher }));
      assert.equal(moved.status, 402, moved.text.slice(0, 300));
      assert.equal(moved.body.error, 'PAYMENT_REJECTED');
      assert.deepEqual(await depositsOf(h, otherId), [], 'nothing deposited into the other channel');
      assert.equal((await readOnchainChannel(reader(h), otherId)).balance, 0n);
      const own = await paid(h, header);
      assert.equal(own.status, 200, own.text);
      await depositedOnce(h, deposit.voucher.channelId, deposit.deposit.amount);
    });

    test('a deposit whose request failed upstream, sent again: one deposit, and the retry is served on it', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const { deposit, header } = await depositPayload(h, account);
      h.fake.behaviour = { failStatus: 500 };
      try {
        const failed = await paid(h, header);
        assert.ok(failed.status >= 500 && failed.status < 600, failed.text);
      } finally {
        h.fake.behaviour = {};
      }
      const row = (await channelOf(h, account))!;
      assert.equal(row.charged_usdc, 0, 'the failed request charged nothing');
      const retried = await paid(h, header);
      assert.ok(retried.status < 500, retried.text.slice(0, 300));
      assert.equal(retried.status, 200, `the deposit's voucher is good for the retry: ${retried.body.message}`);
      await depositedOnce(h, deposit.voucher.channelId, deposit.deposit.amount);
    });

    test('the stock client retrying after its first (deposit) request failed upstream is served, on one deposit', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      h.fake.behaviour = { failStatus: 500 };
      try {
        await assert.rejects(payer.openai.chat.completions.create(CHAT_BODY));
      } finally {
        h.fake.behaviour = {};
      }
      const { data } = await payer.openai.chat.completions.create(CHAT_BODY).withResponse();
      assert.ok(data.choices[0]);
      const row = (await channelOf(h, account))!;
      assert.ok(row.charged_usdc > 0);
      assert.equal((await depositsOf(h, row.channel_id)).length, 1, 'one deposit');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
