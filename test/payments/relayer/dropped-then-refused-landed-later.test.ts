import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { parseTransaction, type Hex } from 'viem';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { topupThenDropSettlement } from '../../support/dropped-settlement.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { chainReader, fiveUsdTopup, landedByStranger, moveAllUsdc, paymentOf } from '../../support/reverted-settlement.ts';

/**
 * A settlement the node dropped was broadcast: every node and mempool watcher that saw it holds its
 * calldata, the whole authorization. The payment is released and watched; but the payer's retry of
 * the same payment reopened it, and when that retry was refused before anything was sent (the payer
 * had moved its funds: insufficient balance, 402 "sign a new payment"), the payment became failed
 * with no hash, a failed payment the watch takes as "its authorization never left the gateway". Once
 * the payer held the money again, anyone could land the broadcast calldata: payTo was paid, and the
 * payment stayed failed, never credited.
 */
for (const engine of ENGINES) {
  describe(`a dropped settlement whose retry was refused before any send is still watched, and credited when it lands (${engine})`, () => {
    let h: TopupHarness;
    let usdcOffer: PaymentRequirements;
    before(async () => {
      h = await startTopupHarness(engine, { config: { topup: { settleWaitSeconds: 2 } } });
      usdcOffer = (await h.post({ amount: 5 }))!.body.accepts[0];
    });
    after(async () => {
      await h.anvil.rpc('evm_setAutomine', [true]);
      await h?.stop();
    });
    const db = () => h.gw.services.storage.db;
    const row = async (payer: FundedAccount) => (await paymentOf(h, payer))!;
    const client = () => chainReader(h);
    const moveAll = async (from: FundedAccount, to: `0x${string}`) => {
      await client().waitForTransactionReceipt({ hash: await moveAllUsdc(h, from, to) });
    };

    test('dropped, released, retried while unfunded (402), then the broadcast calldata is landed by a stranger: credited once', async () => {
      const payer = await h.payer(5n);
      const sink = await h.chain.newAccount();
      const header = await fiveUsdTopup(h, usdcOffer, payer);
      const payToBefore = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
      const dropped = await topupThenDropSettlement(h, header);
      const seen = parseTransaction(dropped);

      // Past the settle wait the reconciler finds it dropped and releases it.
      await new Promise((r) => setTimeout(r, 2_200));
      await h.gw.services.topup!.reconcile();
      assert.equal((await row(payer)).state, 'released');

      // The payer moved its funds; its retry of the same payment is refused before anything is sent.
      await moveAll(payer, sink.address);
      const refused = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(refused.status, 402, refused.text);
      assert.equal((await row(payer)).state, 'failed');

      // The payer holds the money again; a stranger lands the broadcast calldata.
      await moveAll(sink, payer.address);
      await landedByStranger(h, seen.to!, seen.data as Hex);
      assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - payToBefore, 5n * USD, 'the payer paid');

      await h.gw.services.topup!.reconcile();
      await h.gw.services.topup!.reconcile();
      const after = await row(payer);
      assert.equal(after.state, 'credited', `the payer paid ${5n * USD} units to payTo and the payment is ${after.state} (${after.failure_reason})`);
      assert.equal(await h.balance(payer.address), 5_000_000, 'credited once');
      await assertLedgerAndChainAgree(db(), client(), 0);
    });
  });
}
