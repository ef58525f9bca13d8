import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Abi, encodeAbiParameters, type Hex } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { ENGINES } from '../../support/engines.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { channelPayer, channelSuite, openedChannel, paid } from './channel-harness.ts';
import { claimPass, reader } from './claims-setup.ts';
import { assertBooksEqualChain, assertUnbookedWithoutLogs, expireHold, refundThrownAfterBroadcast } from './followup-setup.ts';
import { SHORT_WAIT, refundsOf } from './review-refund-setup.ts';
import { type DepositPayload, usdcChannelOffer } from './review-seams-setup.ts';

/** `account`'s channel refunded by a facilitator that broadcast the refund and threw: held as refund-tx:unknown, the refund landed. */
async function heldUnknown(h: PayPerRequestHarness, account: FundedAccount) {
  const before = (await findChannel(h.gw.services.storage.db, (await channelIdOf(h, account)) as string))!;
  const payerUsdc = await h.chain.balanceOf(h.chain.usdc, account.address);
  const header = await refundThrownAfterBroadcast(h, account);
  return { before, payerUsdc, header, owed: before.balance_usdc - before.charged_usdc };
}

async function channelIdOf(h: PayPerRequestHarness, account: FundedAccount): Promise<Hex> {
  const row = await h.gw.services.storage.db
    .selectFrom('channels')
    .select('channel_id')
    .where('payer', '=', account.address.toLowerCase())
    .executeTakeFirstOrThrow();
  return row.channel_id as Hex;
}

/** The stock client's deposit payload for `account`'s channel (a fresh client knows no channel yet, so it deposits). */
async function depositPayload(h: PayPerRequestHarness, account: FundedAccount) {
  const offer = await usdcChannelOffer(h);
  const deposit = (await channelPayer(h, account).scheme.createPaymentPayload(2, offer)).payload as unknown as DepositPayload;
  assert.equal(deposit.type, 'deposit');
  return { offer, deposit };
}

/** Anyone relays `deposit` to the contract (its EIP-3009 authorization names the collector, not the sender). */
async function relayDeposit(h: PayPerRequestHarness, deposit: DepositPayload): Promise<void> {
  const auth = deposit.deposit.authorization.erc3009Authorization as { validAfter: string; validBefore: string; salt: string; signature: Hex };
  const collectorData = encodeAbiParameters(
    [{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }],
    [BigInt(auth.validAfter), BigInt(auth.validBefore), BigInt(auth.salt), auth.signature],
  );
  const relay = h.chain.client(await h.payer(0n));
  const hash = await relay.writeContract({
    address: BATCH_SETTLEMENT_ADDRESS,
    abi: artifacts.StandInBatchSettlement.abi as Abi,
    functionName: 'deposit',
    args: [deposit.channelConfig, BigInt(deposit.deposit.amount), ERC3009_DEPOSIT_COLLECTOR_ADDRESS, collectorData],
  });
  assert.equal((await relay.waitForTransactionReceipt({ hash })).status, 'success');
}

for (const engine of ENGINES) {
  describe(`attack: a channel held for a refund of unknown hash, and the payer's money moving meanwhile (${engine})`, () => {
    const harness = channelSuite(engine, SHORT_WAIT);

    test('a deposit payload sent while held, past its window: not served, its deposit not sent; the refund then recorded once', async () => {
      const h = harness();
      const account = await openedChannel(h);
      const r = await heldUnknown(h, account);
      const { offer, deposit } = await depositPayload(h, account);
      assert.equal(deposit.voucher.channelId, r.before.channel_id, 'the same channel');
      // Its 15 minutes passed too: a refund's hold is never released by time.
      await expireHold(h, r.before.channel_id);
      const calls = h.fake.received.length;
      const chainBefore = await readOnchainChannel(reader(h), r.before.channel_id as Hex);
      const answer = await paid(h, v2Header(offer, deposit));
      assert.notEqual(answer.status, 200, answer.text);
      assert.ok(answer.status < 500, `a clear answer, not a failure: ${answer.status} ${answer.text.slice(0, 300)}`);
      assert.equal(h.fake.received.length, calls, 'nothing ran on escrow the refund paid back');
      assert.equal((await readOnchainChannel(reader(h), r.before.channel_id as Hex)).balance, chainBefore.balance, 'no deposit was sent');
      const pass = await claimPass(h, {}, true);
      assert.equal(pass.refunds.length, 1, pass.failures.join('\n'));
      assert.deepEqual(
        (await refundsOf(h, r.before.channel_id)).map(([amount]) => amount),
        [r.owed],
      );
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), r.payerUsdc + BigInt(r.owed), 'the refund paid, no deposit taken');
      await assertBooksEqualChain(h);
    });

    test('a top-up relayed after the refund landed, the event not found: held, nothing booked; then the refund booked once for what it paid', async () => {
      const h = harness();
      const account = await openedChannel(h);
      const r = await heldUnknown(h, account);
      const { deposit } = await depositPayload(h, account);
      await relayDeposit(h, deposit);
      await assertUnbookedWithoutLogs(h, r.before.channel_id, r.before.refund_nonce, r.header);
      const later = await claimPass(h, {}, true);
      assert.equal(later.refunds.length, 1, later.failures.join('\n'));
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), r.payerUsdc + BigInt(r.owed) - BigInt(deposit.deposit.amount));
      assert.deepEqual(
        (await refundsOf(h, r.before.channel_id)).map(([amount]) => amount),
        [r.owed],
        'the refund is in the books for what the payer received, once',
      );
      await assertBooksEqualChain(h);
    });
  });
}
