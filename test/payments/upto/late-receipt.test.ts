import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { runTollgate } from '../../support/cli.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { markUnsettled } from '../../../src/payments/upto/upto-store.ts';
import { operatorConfig, sentButUnmined, signedUptoHeader, UPTO_BODY, uptoOpenAI, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * A slow block (the receipt not seen within topup.settleWaitSeconds) makes @x402/evm's upto settle
 * answer `success: false, errorReason: "settlement_pending"` with the transaction it sent.
 * settle-upto.ts (sendCharge) treats every unsuccessful answer whose reason does not mention a
 * nonce as a definite refusal and marks the payment `unsettled`, although its transaction is in
 * the pool and lands a moment later. docs/DECISIONS.md (x402 `upto`) says "a settle that does not complete is
 * not a failure ... outcome unknown leaves the row settling". The reconciler never looks at
 * unsettled rows, so the payer, who paid, is refused every later payment (403 UPTO_UNSETTLED),
 * the unsettled metric counts a payment that was settled, and ledger-check lists money as owed
 * that arrived, until an operator runs `tollgate admin upto retry` by hand.
 *
 * The rule (docs/DECISIONS.md, "A settle that does not complete is not a failure"): an answer that
 * carries a transaction keeps the row `settling` with its hash, and the reconciler reads the chain.
 * So these tests do not wait for the row to leave `settling` before the block is mined: they wait
 * for the settle to have sent and answered (its hash recorded, the settle wait over) and check the
 * row is still `settling`, not `unsettled`.
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
        row = await sentButUnmined(h, payer);
        assert.equal(row.upto_state, 'settling', `a late receipt is not a failure: ${row.failure_reason}`);
      } finally {
        await h.anvil.rpc('evm_mine');
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      const charge = BigInt(row.settle_amount_atomic!);
      assert.ok(charge > 0n);
      // The money arrived: exactly the charge left the payer for payTo.
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - charge, 'the charge was paid on chain');

      // The gateway's own reconciler (the timer, or a restart) runs: it should take the payment as settled.
      await h.gw.services.storage.db
        .updateTable('payments')
        .set({ updated_at: Date.now() - 60_000 })
        .where('id', '=', row.id)
        .execute();
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

    test('written off on a false unsettled, then the money lands: ledger-check --chain names the command, and `tollgate admin upto retry` closes it settled', async () => {
      const h = harness();
      restore = () => h.anvil.rpc('evm_setAutomine', [true]);
      const op = operatorConfig(h);
      const payer = await uptoPayer(h);
      await h.anvil.rpc('evm_setAutomine', [false]);
      let row;
      try {
        await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
        row = await sentButUnmined(h, payer);
        // The gateway does not record this unsettled; a row that is (written by an older
        // gateway, or a settle given up while its transaction was still pooled) is made so here.
        assert.ok(await markUnsettled(h.gw.services.storage.db, row.id, 'the settle failed: settlement_pending'));
        // The operator, told the settle failed, writes it off; then the block comes.
        const off = await runTollgate(['admin', 'upto', 'write-off', row.id, '--reason', 'payer unreachable'], op.env);
        assert.equal(off.code, 0, off.stdout + off.stderr);
      } finally {
        await h.anvil.rpc('evm_mine');
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      try {
        assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'the charge arrived');
        const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
        const told = audit.problems.find((p) => p.includes(row.id));
        assert.ok(told && /tollgate admin upto retry/.test(told), `ledger-check --chain: ${audit.problems.join('; ')}`);
        const sentBefore = await h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, 'latest']);
        const retried = await runTollgate(['admin', 'upto', 'retry', row.id], op.env);
        assert.equal(retried.code, 0, `ledger-check --chain says "${told}", and the retry it names answers: ${retried.stdout}${retried.stderr}`);
        assert.match(retried.stdout, new RegExp(`payment ${row.id}: settled \\(0x[0-9a-f]{64}\\)`));
        assert.equal(await h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, 'latest']), sentBefore, 'nothing sent again');
        const [closed] = await h.gw.services.storage.db.selectFrom('payments').selectAll().where('id', '=', row.id).execute();
        assert.equal(closed!.upto_state, 'settled');
        assert.equal(closed!.onchain_amount_atomic, row.settle_amount_atomic);
        const again = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
        assert.deepEqual(
          again.problems.filter((p) => p.includes(row.id)),
          [],
        );
        await assertLedgerConsistent(h.gw.services.storage.db);
      } finally {
        op.done();
      }
    });
  });
}
