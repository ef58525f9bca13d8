import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { settledUpto, UPTO_BODY, uptoOpenAI, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * attack: a non-streamed upto request that would outlive its authorization (a slow provider). The cut
 * at deadline − settle wait − drain bound − 10 s (uptoRunUntil) disconnected the client, but a JSON
 * request is no drain: the gateway kept awaiting the provider (bounded by chat.firstByteTimeoutSeconds
 * and the idle timeout, not by the drain bound) and fixed its charge once the provider answered, after
 * the deadline: the client was charged for an answer it never received, the settle failed
 * (permit2_deadline_expired), the payment was left `unsettled` and the honest payer refused every later
 * payment. Now the cut aborts the call under way and voids it: nothing charged, settled for 0 in time.
 * The same settings as deadline-cut.test.ts (cut at about 62 s), with slow first bytes allowed (100 s,
 * as for a reasoning model answered whole) and a provider that answers at 85 s.
 */
describe('attack: a non-streamed upto request longer than its authorization (sqlite)', () => {
  const harness = uptoSuite('sqlite', { topup: { maxTimeoutSeconds: 78 }, chat: { drainTimeoutSeconds: 1, firstByteTimeoutSeconds: 100 } });

  test('cut before the deadline, its call aborted and voided, and the hold settled for nothing in time', { timeout: 180_000 }, async () => {
    const h = harness();
    const payer = await uptoPayer(h);
    h.fake.behaviour = { delayMs: 85_000 };
    const started = Date.now();
    try {
      await assert.rejects(uptoOpenAI(h, payer).chat.completions.create({ ...UPTO_BODY }), 'the client is cut');
    } finally {
      h.fake.behaviour = {};
    }
    const cutAfter = (Date.now() - started) / 1000;
    assert.ok(cutAfter < 70, `the client was cut at about 62 s: ${cutAfter}`);
    const row = await settledUpto(h, payer);
    assert.equal(row.upto_state, 'settled', `${row.upto_state}: ${row.failure_reason}`);
    assert.equal(BigInt(row.settle_amount_atomic ?? 0), 0n, 'nothing charged for an answer never delivered');
    assert.ok(Number(row.updated_at) / 1000 < Number(row.valid_before), 'settled before the deadline');
    assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD, "none of the payer's tokens moved");
    const usage = await h.gw.services.storage.db
      .selectFrom('request_usage')
      .select(['status', 'charged_usdc'])
      .where('wallet', '=', `${payer.address.toLowerCase()}#upto`)
      .execute();
    assert.deepEqual(
      usage.map((u) => Number(u.charged_usdc)),
      usage.map(() => 0),
    );
    await assertLedgerConsistent(h.gw.services.storage.db);
  });
});
