import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { settledUpto, UPTO_BODY, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * attack: a non-streamed upto request that would outlive its authorization. The cut at deadline −
 * settle wait − drain bound − 10 s (uptoRunUntil) disconnected the client, but an answer that is not
 * streamed cannot be drained: the gateway kept awaiting the provider and fixed its charge once it
 * answered, after the deadline: the client was charged for an answer it never received, the settle
 * failed (permit2_deadline_expired), the payment was left `unsettled` and the honest payer refused
 * every later payment. Now such a request must have room for its whole answer (the first-byte timeout)
 * to be admitted, and one still under way at the cut (a provider trickling its body) is aborted and
 * voided: nothing charged, settled for 0 in time. With topup.maxTimeoutSeconds 78, a 5 s settle wait
 * and a 1 s drain, the request is cut at about 62 s.
 */
describe('attack: a non-streamed upto request longer than its authorization (sqlite)', () => {
  describe('a first-byte timeout longer than the deadline leaves', () => {
    const harness = uptoSuite('sqlite', { topup: { maxTimeoutSeconds: 78 }, chat: { drainTimeoutSeconds: 1, firstByteTimeoutSeconds: 100 } });

    test('is refused 402 PAYMENT_EXPIRED before anything is recorded or generated', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const err = await uptoOpenAI(h, payer)
        .chat.completions.create({ ...UPTO_BODY })
        .then(
          () => null,
          (e: unknown) => e as { status?: number; message?: string },
        );
      assert.equal(err?.status, 402, String(err?.message));
      assert.deepEqual(await uptoPayments(h, payer), [], 'nothing recorded');
      assert.equal(h.fake.received.length, 0, 'the provider was not asked');
    });
  });

  describe('an answer still arriving at the cut', () => {
    const harness = uptoSuite('sqlite', { topup: { maxTimeoutSeconds: 78 }, chat: { drainTimeoutSeconds: 1 } });

    test('is aborted and voided at the cut, and the hold settled for nothing before the deadline', { timeout: 180_000 }, async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      // Admitted (62 s to run, the first-byte timeout 60 s); its body comes in four pieces 25 s apart.
      h.fake.behaviour = { answerPieceDelayMs: 25_000 };
      const started = Date.now();
      try {
        await assert.rejects(uptoOpenAI(h, payer).chat.completions.create({ ...UPTO_BODY }), 'the client is cut');
      } finally {
        h.fake.behaviour = {};
      }
      const cutAfter = (Date.now() - started) / 1000;
      assert.ok(cutAfter > 55 && cutAfter < 70, `the client was cut at about 62 s: ${cutAfter}`);
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled', `${row.upto_state}: ${row.failure_reason}`);
      assert.equal(BigInt(row.settle_amount_atomic ?? 0), 0n, 'nothing charged for an answer never delivered');
      assert.ok(Number(row.updated_at) / 1000 < Number(row.valid_before), 'settled before the deadline');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD, "none of the payer's tokens moved");
      const usage = await h.gw.services.storage.db
        .selectFrom('request_usage')
        .select(['charged_usdc'])
        .where('wallet', '=', `${payer.address.toLowerCase()}#upto`)
        .execute();
      assert.ok(
        usage.every((u) => Number(u.charged_usdc) === 0),
        JSON.stringify(usage),
      );
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
});
