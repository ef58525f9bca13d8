import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme, type BatchSettlementEvmSchemeOptions } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { type Address, zeroAddress } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { CHAT_BODY, paid } from './channel-harness.ts';
import { assertClaimedAsCharged, claimPass, claimsSuite, reader } from './claims-setup.ts';

/**
 * Channels against the payers the gateway already takes elsewhere: contract wallets (EIP-1271, as
 * top-ups and SIWE take them) and Permit2 tokens (the USDT-like offer). Each is paid by the stock
 * `@x402/evm` batch-settlement client, as far as the chain and the facilitator let it, and what a
 * request is charged is then claimed on chain: a charge the contract cannot collect is money lost.
 */

type Signer = Parameters<typeof toClientEvmSigner>[0];

/** The stock client paying the batch-settlement entry of `token`, as `signer`. */
function stockClient(h: PayPerRequestHarness, signer: Signer, token: Address, options: BatchSettlementEvmSchemeOptions = {}) {
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(signer, reader(h)), options);
  const entry = (_v: number, accepts: PaymentRequirements[]) =>
    accepts.find((r) => r.scheme === 'batch-settlement' && r.asset.toLowerCase() === token.toLowerCase()) ?? accepts[0]!;
  const client = new x402Client(entry).register('eip155:*', scheme);
  client.setSpendControls({ maxAmountPerPayment: '$100', allowedAssets: [{ network: h.chain.network, asset: token, maxAmountPerPayment: '100000000' }] });
  const paying = wrapFetchWithPayment(fetch, client) as typeof fetch;
  return async () => {
    const res = await paying(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(CHAT_BODY),
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
}

/** A deployed TestSmartWallet of a fresh owner key, holding 10 USDC; the owner's key signs for it (ERC-1271). */
async function smartWallet(h: PayPerRequestHarness) {
  const owner = privateKeyToAccount(generatePrivateKey());
  const address = await h.chain.deploySmartWallet(owner.address, generatePrivateKey());
  await h.chain.mintUsdc(address, 10n * USD);
  const signer: Signer = { address, signTypedData: (m) => owner.signTypedData(m as Parameters<typeof owner.signTypedData>[0]) };
  return { owner, address, signer };
}

const channelsOf = (h: PayPerRequestHarness, payer: Address) =>
  h.gw.services.storage.db.selectFrom('channels').selectAll().where('payer', '=', payer.toLowerCase()).execute();

/** `send` served `n` times, each charged within its ceiling; the channel's charges then claimed on chain; ledger-check clean. */
async function servedAndClaimed(h: PayPerRequestHarness, payer: Address, send: () => Promise<{ status: number; text: string }>, n = 3) {
  for (let i = 0; i < n; i++) {
    const answer = await send();
    assert.equal(answer.status, 200, answer.text.slice(0, 400));
  }
  const [row] = await channelsOf(h, payer);
  assert.ok(row && Number(row.charged_usdc) > 0, 'the channel was charged');
  await assertLedgerConsistent(h.gw.services.storage.db);
  await claimPass(h, {}, true);
  await assertClaimedAsCharged(h, [row.channel_id]);
  await assertLedgerConsistent(h.gw.services.storage.db);
  return row;
}

for (const engine of ENGINES) {
  describe(`attack: batch-settlement channels of contract wallets and Permit2 tokens (${engine})`, () => {
    const harness = claimsSuite(engine);

    test("a smart wallet named as its own payer authorizer (the stock client's default) is refused with a clear 402: no deposit, nothing served", async () => {
      const h = harness();
      const wallet = await smartWallet(h);
      const calls = h.fake.received.length;
      const answer = await stockClient(h, wallet.signer, h.chain.usdc)();
      assert.equal(answer.status, 402, answer.text.slice(0, 400));
      // The contract recovers a payerAuthorizer's vouchers by ECDSA only: a contract address never signs one.
      const { reason } = JSON.parse(answer.text) as { reason: string };
      assert.match(reason, /^invalid_batch_settlement_evm_voucher_signature/);
      // The refusal says what to do: the owner key as payerAuthorizer, or a zero one for ERC-1271.
      assert.match(reason, /contract wallet/);
      assert.match(reason, /voucherSigner/);
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, wallet.address), 10n * USD, "the wallet's tokens did not move");
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a smart wallet whose owner key authorizes its vouchers: deposited by ERC-1271, served, and every charge claimed on chain', async () => {
      const h = harness();
      const wallet = await smartWallet(h);
      const send = stockClient(h, wallet.signer, h.chain.usdc, { voucherSigner: toClientEvmSigner(wallet.owner) });
      const row = await servedAndClaimed(h, wallet.address, send);
      assert.equal(row.payer_authorizer, wallet.owner.address.toLowerCase());
    });

    test('a smart wallet with no payer authorizer (each voucher judged by its ERC-1271 answer): served, and every charge claimed on chain', async () => {
      const h = harness();
      const wallet = await smartWallet(h);
      const send = stockClient(h, wallet.signer, h.chain.usdc, { payerAuthorizer: zeroAddress });
      const row = await servedAndClaimed(h, wallet.address, send);
      assert.equal(row.payer_authorizer, zeroAddress);
    });

    test('a USDT channel deposited through Permit2 by the stock client: served, and every charge claimed on chain', async () => {
      const h = harness();
      const account = await h.payer(10n);
      await h.chain.approvePermit2(account, h.chain.usdt);
      const row = await servedAndClaimed(h, account.address, stockClient(h, account, h.chain.usdt));
      assert.equal(row.token, h.chain.usdt.toLowerCase());
    });

    test('a Permit2 deposit sent again after its request failed upstream is served on its voucher: its Permit2 nonce is used, one deposit', async () => {
      const h = harness();
      const account = await h.payer(10n);
      await h.chain.approvePermit2(account, h.chain.usdt);
      const asked = await h.chat(CHAT_BODY);
      const offer = (asked.body.accepts as PaymentRequirements[]).find(
        (o) => o.scheme === 'batch-settlement' && o.asset.toLowerCase() === h.chain.usdt.toLowerCase(),
      )!;
      const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(account, reader(h)));
      const { payload } = await scheme.createPaymentPayload(2, offer);
      assert.ok((payload as { deposit?: { authorization?: { permit2Authorization?: unknown } } }).deposit?.authorization?.permit2Authorization);
      const header = v2Header(offer, payload);
      h.fake.behaviour = { failStatus: 500 };
      try {
        assert.ok((await paid(h, header)).status >= 500);
      } finally {
        h.fake.behaviour = {};
      }
      const retried = await paid(h, header);
      assert.equal(retried.status, 200, retried.body.message);
      const [row] = await channelsOf(h, account.address);
      const deposits = await h.gw.services.storage.db
        .selectFrom('channel_transfers')
        .select('id')
        .where('channel_id', '=', row!.channel_id)
        .where('kind', '=', 'deposit')
        .execute();
      assert.equal(deposits.length, 1, 'one deposit');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, account.address), 9n * USD, 'the payer paid one deposit');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a Permit2 deposit from a wallet that never approved Permit2 is a clear 402: nothing moved, nothing served', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const calls = h.fake.received.length;
      const answer = await stockClient(h, account, h.chain.usdt)();
      assert.equal(answer.status, 402, answer.text.slice(0, 400));
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, account.address), 10n * USD);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
