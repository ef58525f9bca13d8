import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { FacilitatorUnavailable, type Facilitator } from '../../../src/payments/facilitator/facilitator.ts';
import { RelayerCouldNotSend } from '../../../src/payments/relayer/broadcast-refusal.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { chainReader, paymentOf, revertedTopup } from '../../support/reverted-settlement.ts';

/**
 * A payment whose settlement reverted keeps that transaction's hash when the payer's retry of the
 * same payment reopens it. If the retry's own settlement is then never sent (the relayer's queue
 * is full, the facilitator is down during the settle, the gateway stops before the send), nothing
 * of this attempt is on chain and the same payment sent again must settle it. Before, the old
 * reverted hash read as "this attempt was sent": the row stayed pending for good, the reconciler
 * never released it (it releases only rows with no hash), and every later retry was told 202
 * "being settled, do not pay again" until the authorization expired.
 */
for (const engine of ENGINES) {
  describe(`a retry of a reverted payment whose own settlement was never sent can be sent again (${engine})`, () => {
    let h: TopupHarness;
    let usdcOffer: PaymentRequirements;
    before(async () => {
      // The settle wait is also the reconciler's release delay: short, so the test need not wait long.
      h = await startTopupHarness(engine, { config: { topup: { settleWaitSeconds: 2 } } });
      usdcOffer = (await h.post({ amount: 5 }))!.body.accepts[0];
    });
    after(async () => {
      await h.anvil.rpc('evm_setAutomine', [true]);
      await h?.stop();
    });
    const db = () => h.gw.services.storage.db;
    const row = (payer: FundedAccount) => paymentOf(h, payer);
    const client = () => chainReader(h);
    const revertedPayment = () => revertedTopup(h, usdcOffer);

    /** Runs `fn` with the facilitator's settle failing before anything is sent. */
    async function withSettleFailing<T>(failure: Error, fn: () => Promise<T>): Promise<T> {
      const facilitator = h.gw.services.topup!.facilitator as Facilitator;
      const settle = facilitator.settle;
      facilitator.settle = async () => {
        throw failure;
      };
      try {
        return await fn();
      } finally {
        facilitator.settle = settle;
      }
    }

    for (const [name, failure] of [
      ["the relayer's queue is full", new RelayerCouldNotSend('3 settlements are already waiting for the relayer')],
      ['the facilitator is unreachable during the settle', new FacilitatorUnavailable('the payment facilitator is unavailable')],
    ] as const) {
      test(`${name}: the retry is answered 503 and the same payment sent again settles, once`, async () => {
        const { payer, header, revertedHash } = await revertedPayment();
        const payToBefore = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);

        const retry = await withSettleFailing(failure, () => h.post({ amount: 5 }, { 'payment-signature': header }));
        assert.equal(retry.status, 503, `nothing of this attempt was sent, so "send the same payment again": ${retry.status} ${retry.text}`);
        const afterRetry = (await row(payer))!;
        assert.equal(afterRetry.state, 'released', `the attempt sent nothing and was let go (${afterRetry.state}, tx ${afterRetry.tx_hash})`);

        // Past the settle wait, the reconciler has run; the payer sends the same payment again.
        await new Promise((r) => setTimeout(r, 2_200));
        await h.gw.services.topup!.reconcile();
        const again = await h.post({ amount: 5 }, { 'payment-signature': header });
        assert.equal(again.status, 200, `${again.status} ${again.text}`);
        const settled = (await row(payer))!;
        assert.equal(settled.state, 'credited');
        assert.notEqual(settled.tx_hash, revertedHash);
        assert.equal(await h.balance(payer.address), 5_000_000, 'credited once');
        assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - payToBefore, 5n * USD, 'paid once');
        await assertLedgerAndChainAgree(db(), client(), 0);
      });
    }

    test('the gateway stopped after reopening it, before the send: the reconciler releases it and the same payment settles', async () => {
      const { payer, header } = await revertedPayment();
      // The retry reopened and verified the payment, then nothing more happened: its request ends at
      // the fail point before the send, as a process killed there would (crash-before-send.test.ts).
      const topup = h.gw.services.topup!;
      topup.beforeBroadcast = async () => {
        throw new Error('test fail point: the process died before the send');
      };
      try {
        const stopped = await h.post({ amount: 5 }, { 'payment-signature': header });
        assert.equal(stopped.status, 500, stopped.text);
      } finally {
        topup.beforeBroadcast = undefined;
      }
      assert.equal((await row(payer))!.state, 'pending');

      await new Promise((r) => setTimeout(r, 2_200));
      const report = await h.gw.services.topup!.reconcile();
      assert.equal((await row(payer))!.state, 'released', `recorded, never sent this time, and stale: released (${JSON.stringify(report)})`);
      const again = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(again.status, 200, `${again.status} ${again.text}`);
      assert.equal(await h.balance(payer.address), 5_000_000, 'credited once');
      await assertLedgerAndChainAgree(db(), client(), 0);
    });
  });
}
