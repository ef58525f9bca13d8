import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { settledUpto, UPTO_BODY, uptoOpenAI, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * attack: a stream that would outlive its upto authorization (a slow provider, or a payer that reads
 * slowly to push the settle past the deadline). The gateway cuts the request in time for its settle
 * (src/payments/upto/admission.ts, uptoRunUntil): the client is disconnected, the stream drained
 * and billed for what it produced, and that charge is settled before the deadline. With
 * topup.maxTimeoutSeconds 78, a 5 s settle wait and a 1 s drain, the request may run 62 s (the
 * least a request is allowed is 60 s, so this test waits about a minute).
 */
for (const engine of ENGINES) {
  describe(`attack: an upto stream longer than its authorization (${engine})`, () => {
    const harness = uptoSuite(engine, { topup: { maxTimeoutSeconds: 78 }, chat: { drainTimeoutSeconds: 1 } });

    test('cut before the deadline, billed for what was produced, and that is settled', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      h.fake.behaviour = { chunkDelayMs: 8_000 };
      const started = Date.now();
      let text = '';
      try {
        const stream = await uptoOpenAI(h, payer).chat.completions.create({ ...UPTO_BODY, stream: true });
        await (async () => {
          for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
        })().catch(() => undefined); // the cut ends the stream early, with or without an error
      } finally {
        h.fake.behaviour = {};
      }
      const ranSeconds = (Date.now() - started) / 1000;
      assert.ok(ranSeconds < 70, `cut at about 62 s, not at the provider's end (~100 s): ${ranSeconds}`);
      assert.ok(!text.endsWith('paid model.'), 'the answer was cut short');
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      assert.ok(Number(row.updated_at) / 1000 < Number(row.valid_before), 'settled before the deadline');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!));
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
