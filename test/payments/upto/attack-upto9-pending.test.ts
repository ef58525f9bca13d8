import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { retryUpto, writeOffUpto } from '../../../src/payments/upto/operator.ts';
import { settledUpto, signedUptoHeader, UPTO_BODY, uptoOpenAI, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * A slow block (the receipt not seen within topup.settleWaitSeconds) makes @x402/evm's upto settle
 * answer `success: false, errorReason: "settlement_pending"` with the transaction it sent.
 * settle-upto.ts (sendCharge) treats every unsuccessful answer whose reason does not mention a
 * nonce as a definite refusal and marks the payment `unsettled`, although its transaction is in
 * the pool and lands a moment later. DECISIONS-upto9.md says "a settle that does not complete is
 * not a failure ... outcome unknown leaves the row settling". The reconciler never looks at
 * unsettled rows, so the payer, who paid, is refused every later payment (403 UPTO_UNSETTLED),
 * the unsettled metric counts a payment that was settled, and ledger-check lists money as owed
 * that arrived, until an operator runs `tollgate admin upto retry` by hand.
 */
for (const engine of ENGINES) {
  describe(`attack: an upto settle whose receipt is late is recorded unsettled though it paid (${engine})`, () => {
    const harness = uptoSuite(engine, { topup: { settleWaitSeconds: 2 } });
    let restore: (() => Promise<unknown>) | undefined;
    after(async () => restore?.());

    test('settlement_pending: the transaction lands, the payment must end settled and the payer not be refused', async () => {
      const h = harness();
      restore = () => h.anvil.rpc('evm_setAutomine', [true]);
      const payer = await uptoPayer(h);
      // A slow chain: the settle's transaction waits in the pool longer than the settle wait.
      await h.anvil.rpc('evm_setAutomine', [false]);
      let row;
      try {
        const answer = await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
        assert.match(answer.choices[0]!.message.content!, /fake provider/);
        row = await settledUpto(h, payer);
      } finally {
        await h.anvil.rpc('evm_mine');
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      const charge = BigInt(row.settle_amount_atomic!);
      assert.ok(charge > 0n);
      // The money arrived: exactly the charge left the payer for payTo.
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - charge, 'the charge was paid on chain');

      // The gateway's own reconciler (the timer, or a restart) runs: it should take the payment as settled.
      await h.gw.services.storage.db.updateTable('payments').set({ updated_at: Date.now() - 60_000 }).where('id', '=', row.id).execute();
      await h.gw.services.topup!.reconcile();
      const [after] = await h.gw.services.storage.db.selectFrom('payments').selectAll().where('id', '=', row.id).execute();
      assert.equal(after!.upto_state, 'settled', `a payment whose charge arrived is ${after!.upto_state} (${after!.failure_reason})`);

      // The payer paid: their next upto payment must be taken, not refused 403 UPTO_UNSETTLED.
      const next = await h.chat(UPTO_BODY, { 'payment-signature': (await signedUptoHeader(h, payer, UPTO_BODY)).header });
      assert.equal(next.status, 200, next.text);
      const ledger = await checkLedger(h.gw.services.storage.db);
      assert.ok(!ledger.findings.some((f) => f.includes(row.id)), `ledger-check lists paid money as owed: ${ledger.findings.join('; ')}`);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('written off on the false unsettled, then the money lands: ledger-check --chain says retry, and retry refuses', async () => {
      const h = harness();
      restore = () => h.anvil.rpc('evm_setAutomine', [true]);
      const payer = await uptoPayer(h);
      await h.anvil.rpc('evm_setAutomine', [false]);
      let row;
      try {
        await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
        row = await settledUpto(h, payer);
        assert.equal(row.upto_state, 'unsettled', 'the receipt was late');
        // The operator, told the settle failed, writes it off; then the block comes.
        assert.equal((await writeOffUpto(h.gw.services.storage.db, row.id, 'payer unreachable')).kind, 'done');
      } finally {
        await h.anvil.rpc('evm_mine');
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'the charge arrived');
      const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
      const told = audit.problems.find((p) => p.includes(row.id));
      assert.ok(told && /tollgate admin upto retry/.test(told), `ledger-check --chain: ${audit.problems.join('; ')}`);
      const deps = { ...h.gw.services.topup!.upto, logger: { info() {}, warn() {} }, now: Date.now };
      const retried = await retryUpto(deps, row.id);
      assert.equal(retried.kind, 'done', `ledger-check --chain says "${told}", and the retry it names answers: ${(retried as { message?: string }).message}`);
    });
  });
}
