import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { planChat } from '../../src/metered/plan/plan.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { ENGINES } from '../support/engines.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';

const PARALLEL = 200;
const K = 37;

for (const engine of ENGINES) {
  describe(`concurrent spending from one wallet (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine);
    });
    after(() => h.stop());

    test(`${PARALLEL} parallel requests against a balance that covers exactly ${K}`, async (t) => {
      const body = { model: 'chat-small', messages: [{ role: 'user', content: 'spend' }], max_tokens: 100 };
      const plan = planChat(body, h.gw.services.catalog, h.gw.config);
      // The provider reports the full bound, so each request costs exactly its reservation and no
      // early finisher can free money for a later one: exactly K can ever succeed.
      h.fake.behaviour = { usage: { prompt_tokens: plan.promptUpperBound, completion_tokens: plan.maxTokens }, delayMs: 5 };
      const cost = plan.reservationUsdc;
      const funds = K * cost + Math.floor(cost / 2);
      const w = await h.wallet(funds);

      const started = performance.now();
      const results = await Promise.all(
        Array.from({ length: PARALLEL }, () =>
          fetch(`${h.gw.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          }).then(async (r) => ({ status: r.status, body: await r.json() })),
        ),
      );
      const elapsed = performance.now() - started;
      const ok = results.filter((r) => r.status === 200).length;
      const refused = results.filter((r) => r.status === 402);
      t.diagnostic(
        `${engine}: ${PARALLEL} requests in ${elapsed.toFixed(0)} ms: ${ok} succeeded, ${refused.length} refused with 402; each cost ${cost} micro-USDC`,
      );
      assert.equal(ok, K);
      assert.equal(refused.length, PARALLEL - K);
      assert.ok(refused.every((r) => r.body.error === 'INSUFFICIENT_BALANCE'));

      assert.deepEqual(await h.balance(w.account), { balance_usdc: funds - K * cost, locked_usdc: 0, available_usdc: funds - K * cost });
      const check = await checkLedger(h.gw.services.storage.db);
      assert.deepEqual(check.problems, []);
      assert.equal(check.creditsUsdc - check.chargesUsdc, funds - K * cost);
      const charges = await h.gw.services.storage.db
        .selectFrom('ledger_entries')
        .selectAll()
        .where('kind', '=', 'charge')
        .where('wallet', '=', w.account.address.toLowerCase())
        .execute();
      assert.equal(charges.length, K, 'one charge per successful request');
      assert.equal(h.fake.received.length, K, 'refused requests never reached the provider');
    });
  });
}
