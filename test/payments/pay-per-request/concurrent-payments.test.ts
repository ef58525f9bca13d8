import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

/**
 * Different wallets paying for a chat at the same moment. Each payment is settled by a
 * transaction from the gateway's one relayer key; all of them must run, each paid and credited once.
 */
for (const engine of ENGINES) {
  describe(`pay-per-request: wallets paying at the same moment (${engine})`, () => {
    let h: PayPerRequestHarness;
    before(async () => {
      h = await startPayPerRequestHarness(engine);
    });
    after(async () => {
      await h?.stop();
    });

    test('5 wallets pay a chat at once with the stock client: all five run, each paid once', async () => {
      const payers = await h.payers(5, 10n);
      const calls = h.fake.received.length;
      const answers = await Promise.all(
        payers.map((p) => h.openai(p).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 50 })),
      );
      for (const a of answers) assert.match(a.choices[0]!.message.content!, /fake provider/);
      assert.equal(h.fake.received.length - calls, 5, 'the provider ran each request once');
      for (const p of payers) {
        const rows = await h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', p.address.toLowerCase()).execute();
        assert.deepEqual(
          rows.map((r) => [r.status, r.purpose]),
          [['credited', 'chat']],
        );
        assert.equal(await h.chain.balanceOf(h.chain.usdc, p.address), 10_000_000n - BigInt(rows[0]!.amount_atomic));
      }
      await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 5);
    });
  });
}
