import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { reconcileUpto } from '../../../src/payments/upto/reconcile-upto.ts';
import { retryUpto } from '../../../src/payments/upto/operator.ts';
import { sentButUnmined, settledUpto, streamAndRevoke, UPTO_BODY, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * The relayer's fee bump covers exact payments only, so an upto settle can sit in the pool. Past its
 * authorization's deadline it can no longer pay (Permit2 refuses it once mined): the reconciler
 * records it unsettled, counted once, for the operator (docs/DECISIONS.md, "A stuck upto settle").
 * The deadline is reached by handing the reconciler a later clock; anvil's own clock is not moved,
 * so the transaction, mined afterwards, still pays, and the operator's retry then finds it settled
 * without counting the payment a second time.
 */
for (const engine of ENGINES) {
  describe(`upto: a settle stuck in the pool past its deadline (${engine})`, () => {
    const harness = uptoSuite(engine, { topup: { settleWaitSeconds: 2 } });
    let restore: (() => Promise<unknown>) | undefined;
    after(async () => restore?.());

    test('recorded unsettled and counted once; a retry after it lands closes it settled and counts nothing', async () => {
      const h = harness();
      restore = () => h.anvil.rpc('evm_setAutomine', [true]);
      const payer = await uptoPayer(h);
      let counted = 0;
      const logger = { info() {}, warn() {} };
      const deps = { ...h.gw.services.topup!.upto, countUnsettled: () => void counted++, logger };
      await h.anvil.rpc('evm_setAutomine', [false]);
      let row;
      try {
        await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
        row = await sentButUnmined(h, payer);
        assert.equal(row.upto_state, 'settling');

        // Before its deadline: still in flight, left alone.
        await reconcileUpto({ ...deps, now: Date.now, staleMs: 0 });
        assert.equal((await uptoPayments(h, payer)).at(-1)!.upto_state, 'settling');
        // Past it: given up, for the operator.
        const pastDeadline = () => (row!.valid_before + 120) * 1000;
        await reconcileUpto({ ...deps, now: pastDeadline, staleMs: 0 });
        await reconcileUpto({ ...deps, now: pastDeadline, staleMs: 0 });
        const stuck = (await uptoPayments(h, payer)).at(-1)!;
        assert.equal(stuck.upto_state, 'unsettled');
        assert.match(stuck.failure_reason ?? '', /still not mined past the authorization's deadline/);
        assert.equal(counted, 1, 'counted once');
      } finally {
        await h.anvil.rpc('evm_mine');
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      const retried = await retryUpto({ ...deps, now: Date.now }, row.id);
      assert.equal(retried.kind, 'done');
      assert.equal((retried as { payment: { upto_state: string } }).payment.upto_state, 'settled');
      assert.equal(counted, 1, 'the retry counted nothing more');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('an operator retry that fails again does not count the payment as unsettled a second time', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      await streamAndRevoke(h, payer);
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'unsettled');
      let counted = 0;
      const deps = { ...h.gw.services.topup!.upto, countUnsettled: () => void counted++, logger: { info() {}, warn() {} }, now: Date.now };
      const retried = await retryUpto(deps, row.id);
      assert.equal(retried.kind, 'done');
      assert.equal((retried as { payment: { upto_state: string } }).payment.upto_state, 'unsettled', 'the allowance is still revoked');
      assert.equal(counted, 0);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
