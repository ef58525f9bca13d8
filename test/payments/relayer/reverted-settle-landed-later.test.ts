import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { paymentsWatchedAfterLetGo } from '../../../src/payments/payment-store.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { chainReader, fiveUsdTopup, landedByStranger, paymentOf, revertedTopup } from '../../support/reverted-settlement.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';

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

  test('the settle reverts (402, failed); a third party lands the public authorization once the payer is funded again; the reconciler credits it once', async () => {
    const payToBefore = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
    const { payer, header, revertedHash } = await revertedTopup(h, usdcOffer);
    const reverted = await chainReader(h).getTransaction({ hash: revertedHash });
    const landed = await landedByStranger(h, reverted.to!, reverted.input);
    assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - payToBefore, 5n * USD, 'the payer paid');

    await h.gw.services.topup!.reconcile();
    await h.gw.services.topup!.reconcile();
    const credited = (await paymentOf(h, payer))!;
    assert.equal(credited.state, 'credited', `the payer paid ${5n * USD} units to payTo and the payment is ${credited.state} (${credited.failure_reason})`);
    assert.equal(credited.tx_hash, landed.toLowerCase());
    assert.equal(await h.balance(payer.address), 5_000_000, 'credited once');
    await assertLedgerAndChainAgree(h.gw.services.storage.db, chainReader(h), 0);

    // The same payment sent again is that credit, not a second one.
    const again = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(again.status, 200, again.text);
    assert.equal(await h.balance(payer.address), 5_000_000);
  });

  test('a failed payment whose authorization never left the gateway is not read on chain by every pass', async () => {
    // Refused before any transaction (the payer holds nothing): no calldata anywhere, nothing to watch.
    const payer = await h.payer(0n);
    const refused = await h.post({ amount: 5 }, { 'payment-signature': await fiveUsdTopup(h, usdcOffer, payer) });
    assert.equal(refused.status, 402, refused.text);
    const r = (await paymentOf(h, payer))!;
    assert.equal(r.state, 'failed');
    assert.equal(r.tx_hash, null);
    const watched = await paymentsWatchedAfterLetGo(h.gw.services.storage.db, Math.floor(Date.now() / 1000));
    assert.ok(!watched.some((w) => w.id === r.id), 'never sent: not watched');
  });
});
