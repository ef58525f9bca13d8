import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { erc20Abi, type Hex } from 'viem';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { paymentsWatchedAfterLetGo } from '../../../src/payments/payment-store.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { signEip3009, v2Header } from '../../support/x402-payloads.ts';

/**
 * A settlement that reverted on chain (the payer moved its funds away while the transaction waited
 * to be mined) is a failed payment, but its authorization is unused, still valid, and public: the
 * reverted transaction's calldata holds it whole. Anyone may put it on chain again once the payer
 * holds the money, and the money then reaches payTo. The gateway must credit it, as it credits a
 * released payment whose transaction came back; before, the row stayed failed and the payer paid
 * for nothing.
 */
describe('a reverted settlement whose authorization is landed later by someone else is credited', () => {
  let h: TopupHarness;
  let usdcOffer: PaymentRequirements;
  before(async () => {
    h = await startTopupHarness('sqlite', { config: { topup: { settleWaitSeconds: 20 } } });
    usdcOffer = (await h.post({ amount: 5 }))!.body.accepts[0];
  });
  after(async () => {
    await h.anvil.rpc('evm_setAutomine', [true]);
    await h?.stop();
  });
  const db = () => h.gw.services.storage.db;
  const row = (payer: FundedAccount) => db().selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).executeTakeFirst();
  const client = () => h.gw.services.topup!.clientFor(h.chain.network)!;
  const transferAll = async (from: FundedAccount, to: `0x${string}`, fees: { maxPriorityFeePerGas: bigint; maxFeePerGas: bigint }) => {
    const amount = await h.chain.balanceOf(h.chain.usdc, from.address);
    return h.chain.client(from).writeContract({
      address: h.chain.usdc,
      abi: erc20Abi,
      functionName: 'transfer',
      args: [to, amount],
      chain: h.chain.chain,
      account: from,
      gas: 100_000n,
      ...fees,
    });
  };

  test('the settle reverts (402, failed); a third party lands the public authorization once the payer is funded again; the reconciler credits it once', async () => {
    const payer = await h.payer(5n);
    const sink = await h.chain.newAccount();
    const header = v2Header(
      usdcOffer,
      await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD }),
    );
    const payToBefore = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
    await h.anvil.rpc('evm_setAutomine', [false]);
    let answer;
    try {
      const posted = h.post({ amount: 5 }, { 'payment-signature': header });
      // The gateway's settlement waits in the pool; the payer's transfer away outbids it into the same block.
      await until(async () => Boolean((await row(payer))?.tx_hash), 'the settlement sent');
      const sent = (await row(payer))!.tx_hash;
      await transferAll(payer, sink.address, { maxPriorityFeePerGas: 500n * 10n ** 9n, maxFeePerGas: 1000n * 10n ** 9n });
      await h.anvil.rpc('evm_mine');
      const receipt = await client().getTransactionReceipt({ hash: sent as Hex });
      assert.equal(receipt.status, 'reverted', 'the settlement reverted on chain');
      answer = await posted;
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
    }
    assert.equal(answer.status, 402, answer.text);
    const failed = (await row(payer))!;
    assert.equal(failed.state, 'failed');
    assert.equal(await h.balance(payer.address), 0);

    // The reverted transaction's calldata, sent again by someone else once the payer holds the money.
    const reverted = await client().getTransaction({ hash: failed.tx_hash as Hex });
    const sinkBack = await transferAll(sink, payer.address, { maxPriorityFeePerGas: 10n ** 9n, maxFeePerGas: 10n ** 11n });
    await client().waitForTransactionReceipt({ hash: sinkBack });
    const stranger = await h.chain.newAccount();
    const landed = await h.chain
      .client(stranger)
      .sendTransaction({ to: reverted.to!, data: reverted.input, account: stranger, chain: h.chain.chain, gas: 200_000n });
    assert.equal((await client().waitForTransactionReceipt({ hash: landed })).status, 'success');
    assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - payToBefore, 5n * USD, 'the payer paid');

    await h.gw.services.topup!.reconcile();
    await h.gw.services.topup!.reconcile();
    const credited = (await row(payer))!;
    assert.equal(credited.state, 'credited', `the payer paid ${5n * USD} units to payTo and the payment is ${credited.state} (${credited.failure_reason})`);
    assert.equal(credited.tx_hash, landed.toLowerCase());
    assert.equal(await h.balance(payer.address), 5_000_000, 'credited once');
    await assertLedgerAndChainAgree(db(), client(), 0);

    // The same payment sent again is that credit, not a second one.
    const again = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(again.status, 200, again.text);
    assert.equal(await h.balance(payer.address), 5_000_000);
  });

  test('a failed payment whose authorization never left the gateway is not read on chain by every pass', async () => {
    // Refused before any transaction (the payer holds nothing): no calldata anywhere, nothing to watch.
    const payer = await h.payer(0n);
    const header = v2Header(
      usdcOffer,
      await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD }),
    );
    const refused = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(refused.status, 402, refused.text);
    const r = (await row(payer))!;
    assert.equal(r.state, 'failed');
    assert.equal(r.tx_hash, null);
    const watched = await paymentsWatchedAfterLetGo(db(), Math.floor(Date.now() / 1000));
    assert.ok(!watched.some((w) => w.id === r.id), 'never sent: not watched');
  });
});
