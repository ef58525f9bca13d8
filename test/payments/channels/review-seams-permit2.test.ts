import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme, signVoucher } from '@x402/evm/batch-settlement/client';
import { createPublicClient, http } from 'viem';
import { isTransportError } from '../../../src/chain/rpc-errors.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { freePort } from '../../../src/devchain/ports.ts';
import type { ChannelPayload } from '../../../src/payments/channels/channel-payload.ts';
import { landedDeposit } from '../../../src/payments/channels/deposit-landed.ts';
import { ENGINES } from '../../support/engines.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { CHAT_BODY, paid } from './channel-harness.ts';
import { claimsSuite, reader } from './claims-setup.ts';
import { type DepositPayload, mirroredOnce } from './review-seams-setup.ts';

/**
 * The landed-deposit check (deposit-landed.ts) on a Permit2 token: a deposit payload whose token
 * authorization reads as used is taken as its voucher. Attacked with an authorization of another
 * channel, and with an EIP-3009 authorization on a token that has no EIP-3009.
 */

async function usdtOffer(h: PayPerRequestHarness): Promise<PaymentRequirements> {
  const asked = await h.chat(CHAT_BODY);
  return (asked.body.accepts as PaymentRequirements[]).find((o) => o.scheme === 'batch-settlement' && o.asset.toLowerCase() === h.chain.usdt.toLowerCase())!;
}

/** A USDT channel (of `salt`, the stock client's own by default) opened by the stock client's deposit payload and one request served; that payload. */
async function openedUsdtChannel(h: PayPerRequestHarness, account: FundedAccount, salt?: `0x${string}`) {
  const offer = await usdtOffer(h);
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(account, reader(h)), salt ? { salt } : {});
  const deposit = (await scheme.createPaymentPayload(2, offer)).payload as unknown as DepositPayload;
  assert.ok(deposit.deposit.authorization.permit2Authorization, 'a Permit2 deposit');
  const served = await paid(h, v2Header(offer, deposit));
  assert.equal(served.status, 200, served.text.slice(0, 300));
  return { offer, deposit };
}

/** `deposit` with `authorization` in place of its own and a voucher for the channel's next request (what it was charged plus the ceiling). */
async function withAuthorization(
  h: PayPerRequestHarness,
  account: FundedAccount,
  offer: PaymentRequirements,
  own: DepositPayload,
  authorization: Record<string, unknown>,
) {
  const channelId = own.voucher.channelId;
  const row = (await h.gw.services.storage.db.selectFrom('channels').select('charged_usdc').where('channel_id', '=', channelId).executeTakeFirst())!;
  const next = String(Number(row.charged_usdc) + Number(offer.amount));
  const voucher = await signVoucher(toClientEvmSigner(account), channelId, next, offer.network);
  return v2Header(offer, { ...own, voucher, deposit: { ...own.deposit, authorization } });
}

const OTHER_SALT = `0x${'42'.repeat(32)}` as const;

/** A payer's two USDT channels, A and B, each opened by its own Permit2 deposit; then B's deposit payload sent with A's used authorization. */
async function crossChannel(h: PayPerRequestHarness) {
  const account = await h.payer(10n);
  await h.chain.approvePermit2(account, h.chain.usdt);
  const a = await openedUsdtChannel(h, account);
  const b = await openedUsdtChannel(h, account, OTHER_SALT);
  const calls = h.fake.received.length;
  const answer = await paid(h, await withAuthorization(h, account, b.offer, b.deposit, a.deposit.deposit.authorization));
  return { a, b, answer, calls };
}

for (const engine of ENGINES) {
  describe(`attack: the landed-deposit check on Permit2 deposits (${engine})`, () => {
    const harness = claimsSuite(engine);

    test("another channel's used Permit2 authorization on a channel's deposit payload: no deposit invented, the mirror is the chain's", async () => {
      const h = harness();
      const { a, b, answer } = await crossChannel(h);
      assert.ok(answer.status < 500, answer.text.slice(0, 300));
      await mirroredOnce(h, a.deposit.voucher.channelId);
      await mirroredOnce(h, b.deposit.voucher.channelId);
    });

    test("another channel's used Permit2 authorization is refused as not this channel's deposit (its witness names the other channel)", async () => {
      const h = harness();
      const { b, answer, calls } = await crossChannel(h);
      assert.equal(answer.status, 402, `taken as channel B's landed deposit: ${answer.status} ${answer.text.slice(0, 200)}`);
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      await mirroredOnce(h, b.deposit.voucher.channelId);
    });

    test('an EIP-3009 authorization on a deposit payload of a Permit2-only token is a clear 4xx, never a 500; nothing moved', async () => {
      const h = harness();
      const account = await h.payer(10n);
      await h.chain.approvePermit2(account, h.chain.usdt);
      const { offer, deposit } = await openedUsdtChannel(h, account);
      const erc3009Authorization = { validAfter: '0', validBefore: '99999999999', salt: `0x${'11'.repeat(32)}`, signature: `0x${'ab'.repeat(65)}` };
      const calls = h.fake.received.length;
      const answer = await paid(h, await withAuthorization(h, account, offer, deposit, { erc3009Authorization }));
      assert.ok(answer.status >= 400 && answer.status < 500, `${answer.status} ${answer.text.slice(0, 300)}`);
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      await mirroredOnce(h, deposit.voucher.channelId);
    });

    test('a landed read the token refuses (no authorizationState) is "not landed"; a chain that does not answer stays an outage', async () => {
      const h = harness();
      const account = await h.payer(10n);
      await h.chain.approvePermit2(account, h.chain.usdt);
      const { deposit } = await openedUsdtChannel(h, account);
      const erc3009Authorization = { validAfter: '0', validBefore: '99999999999', salt: `0x${'11'.repeat(32)}`, signature: `0x${'ab'.repeat(65)}` };
      const payload = { ...deposit, deposit: { ...deposit.deposit, authorization: { erc3009Authorization } } } as unknown as Extract<
        ChannelPayload,
        { type: 'deposit' }
      >;
      const channelId = deposit.voucher.channelId;
      assert.equal(await landedDeposit(reader(h), channelId, payload), null);
      const down = createPublicClient({ transport: http(`http://127.0.0.1:${await freePort()}`, { retryCount: 0 }) });
      await assert.rejects(landedDeposit(down, channelId, payload), isTransportError);
    });
  });
}
