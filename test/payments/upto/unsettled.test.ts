import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { APIError } from 'openai';
import { ENGINES } from '../../support/engines.ts';
import { until } from '../../support/until.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { retryUpto, writeOffUpto } from '../../../src/payments/upto/operator.ts';
import { USD } from '../../support/topup-harness.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import {
  holdBalance,
  settledUpto,
  signedUptoHeader,
  streamAndRevoke,
  uptoOpenAI,
  uptoPayer,
  uptoPayments,
  uptoSuite,
} from '../../support/upto-pay-per-request.ts';

/**
 * An upto answer is delivered before it is paid. A payer who revokes Permit2 during the stream gets
 * the answer, and the settle fails: recorded with its reason, counted, listed by ledger-check, and
 * every later payment of that wallet (upto and exact) refused until the operator retries it (after
 * the payer approved again) or writes it off. Two requests of one payer at once: one runs.
 */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

async function unsettledMetric(h: PayPerRequestHarness): Promise<number> {
  const metric = await h.gw.services.metrics.uptoUnsettled.get();
  return metric.values.reduce((a, v) => a + v.value, 0);
}

/** The stock SDK sees 403 UPTO_UNSETTLED (openai-node keeps only the code of a spec-format body); a raw request reads the message. */
async function refusedAsUnsettled(h: PayPerRequestHarness, payer: FundedAccount, call: Promise<unknown>, payment: string) {
  const err = await call.then(
    () => assert.fail('the payment was taken'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof APIError, String(err));
  assert.equal(err.status, 403);
  assert.equal(err.error, 'UPTO_UNSETTLED');
  const raw = await h.chat(BODY, { 'payment-signature': (await signedUptoHeader(h, payer, BODY)).header });
  assert.equal(raw.status, 403, raw.text);
  assert.equal(raw.body.error, 'UPTO_UNSETTLED');
  assert.match(raw.body.message, new RegExp(`upto payment ${payment}`));
  assert.match(raw.body.message, /Hold at least .* approve Permit2 .* for at least that much/);
  assert.match(raw.body.message, /tollgate admin upto retry/);
}

for (const engine of ENGINES) {
  describe(`attack: a payer who revokes Permit2 during an upto stream (${engine})`, () => {
    // The background reconciler (which collects a restored wallet's charge by itself) runs once, at
    // start-up: these tests show the refusal while the payer approves again, and the operator's ways out.
    const harness = uptoSuite(engine, { topup: { reconcileIntervalSeconds: 3600 } });

    test('answered, not settled: recorded, counted, listed, the payer refused until written off', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const before = await unsettledMetric(h);
      assert.match(await streamAndRevoke(h, payer), /fake provider/, 'the answer was delivered');
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'unsettled');
      assert.match(row.failure_reason!, /allowance|failed/);
      assert.ok(BigInt(row.settle_amount_atomic!) > 0n);
      // Counted once the row's update has returned to the gateway, which can be just after this test saw the row.
      await until(async () => (await unsettledMetric(h)) > before, 'tollgate_upto_unsettled_total counted');
      assert.equal(await unsettledMetric(h), before + 1, 'tollgate_upto_unsettled_total');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD, 'nothing arrived');
      assert.equal((await holdBalance(h, payer)).balance_usdc, 0);
      assert.equal(await h.balance(payer.address), 0);
      const ledger = await checkLedger(h.gw.services.storage.db);
      assert.deepEqual(ledger.problems, []);
      assert.ok(
        ledger.findings.some((f) => f.includes(`upto payment ${row.id}`) && f.includes('not settled on chain')),
        'ledger-check lists it',
      );
      const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
      assert.deepEqual(audit.problems, [], 'the chain agrees: nothing arrived for it');

      await h.chain.approvePermit2(payer, h.chain.usdt);
      await refusedAsUnsettled(h, payer, uptoOpenAI(h, payer).chat.completions.create(BODY), row.id);
      await refusedAsUnsettled(h, payer, h.openai(payer, 'permit2').chat.completions.create(BODY), row.id);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD, 'no payment was taken');

      const off = await writeOffUpto(h.gw.services.storage.db, row.id, 'test: payer unreachable');
      assert.equal(off.kind, 'done');
      assert.equal((await writeOffUpto(h.gw.services.storage.db, row.id, 'again')).kind, 'refused', 'written off once');
      const ledgerAfter = await checkLedger(h.gw.services.storage.db);
      assert.ok(ledgerAfter.findings.some((f) => f.includes(`upto payment ${row.id}`) && f.includes('written off')));
      const next = await uptoOpenAI(h, payer).chat.completions.create(BODY);
      assert.match(next.choices[0]!.message.content!, /fake provider/, 'the payer may pay again');
      assert.equal((await settledUpto(h, payer)).upto_state, 'settled');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('retried by the operator once the payer approved again: settled for the same amount', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      await streamAndRevoke(h, payer);
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'unsettled');
      const deps = { ...h.gw.services.topup!.upto, logger: { info() {}, warn() {} }, now: Date.now };
      // Still revoked: the retry fails again and the payment stays unsettled.
      assert.equal(((await retryUpto(deps, row.id)) as { payment: { upto_state: string } }).payment.upto_state, 'unsettled');
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const retried = await retryUpto(deps, row.id);
      assert.equal(retried.kind, 'done');
      const done = (retried as { payment: typeof row }).payment;
      assert.equal(done.upto_state, 'settled', done.failure_reason ?? '');
      assert.equal(done.onchain_amount_atomic, row.settle_amount_atomic);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'exactly the charge, once');
      assert.equal((await retryUpto(deps, row.id)).kind, 'refused', 'a settled payment is not sent again');
      await assertLedgerConsistent(h.gw.services.storage.db);
      const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
      assert.deepEqual(audit.problems, []);
    });

    test('two concurrent upto requests of one payer: one runs, the other is told to wait', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      h.fake.behaviour = { delayMs: 1500 };
      let results: PromiseSettledResult<unknown>[];
      try {
        results = await Promise.allSettled([uptoOpenAI(h, payer).chat.completions.create(BODY), uptoOpenAI(h, payer).chat.completions.create(BODY)]);
      } finally {
        h.fake.behaviour = {};
      }
      const ran = results.filter((r) => r.status === 'fulfilled');
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      assert.equal(ran.length, 1, 'exactly one ran');
      assert.equal(refused.length, 1);
      const err = refused[0]!.reason as APIError;
      assert.equal(err.status, 409, String(err));
      assert.equal(err.error, 'UPTO_BUSY');
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'one charge settled');

      // What the refused request reads (openai-node keeps only the code of a spec-format body).
      h.fake.behaviour = { delayMs: 1500 };
      try {
        const running = uptoOpenAI(h, payer).chat.completions.create(BODY);
        await until(async () => (await uptoPayments(h, payer)).some((p) => p.upto_state === 'holding'), 'the first request holds its maximum');
        const raw = await h.chat(BODY, { 'payment-signature': (await signedUptoHeader(h, payer, BODY)).header });
        assert.equal(raw.status, 409, raw.text);
        assert.equal(raw.body.error, 'UPTO_BUSY');
        assert.match(raw.body.message, /one request at a time per wallet/);
        await running;
      } finally {
        h.fake.behaviour = {};
      }
      await settledUpto(h, payer);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
