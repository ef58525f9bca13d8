import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { CHAT_BODY, channelCharges, channelOf, channelOffersOf, channelPayer, channelSuite } from './channel-harness.ts';

/**
 * The honest side of a voucher that paid for a request paying for no other: the stock client
 * (@x402/evm BatchSettlementEvmScheme under the openai SDK, its state kept as the package does)
 * signs "charged + ceiling" for every request, as the spec says. When its next request's ceiling
 * happens to equal the unused rest of its previous voucher (previous max − charged), that is the
 * previous voucher's very maximum, recorded as spent. It was refused with a plain PAYMENT_REJECTED
 * the stock client cannot recover from (it signs the same voucher again). Now the corrective 402
 * states a charged amount one micro-USDC higher, so the client's next voucher is a new maximum; the
 * request is still held and charged at most its ceiling.
 */

const bodyOf = (max_tokens: number, pad: number) => ({
  ...CHAT_BODY,
  messages: [{ role: 'user' as const, content: `a follow-up question${' a'.repeat(pad % 8)}${'.'.repeat(Math.floor(pad / 8))}${'é'.repeat(pad % 3)}` }],
  max_tokens,
});

async function usdcOffer(h: PayPerRequestHarness, body: unknown): Promise<PaymentRequirements> {
  const asked = await h.chat(body);
  assert.equal(asked.status, 402);
  return channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
}

/** A request whose ceiling is exactly `target` (what an agent's next request may well cost). */
async function requestCosting(h: PayPerRequestHarness, target: number): Promise<unknown> {
  for (let pad = 0; pad < 60; pad++) {
    let [lo, hi] = [1, 4000];
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if (Number((await usdcOffer(h, bodyOf(mid, pad))).amount) < target) lo = mid + 1;
      else hi = mid;
    }
    const body = bodyOf(lo, pad);
    if (Number((await usdcOffer(h, body)).amount) === target) return body;
  }
  return undefined;
}

for (const engine of ['sqlite', 'postgres'] as const) {
  describe(`the stock batch-settlement client whose ceiling lands on its last voucher's unused rest (${engine})`, () => {
    const harness = channelSuite(engine);

    test('two honest requests in a row, the second’s ceiling on the first voucher’s unused rest: both run, and the next one too', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      // First request: a generous max_tokens, charged its actual cost (a JSON answer: the client learns the charge).
      const firstBody = { ...CHAT_BODY, max_tokens: 2000 };
      const firstCeiling = Number((await usdcOffer(h, firstBody)).amount);
      const first = await payer.openai.chat.completions.create(firstBody);
      assert.ok(first.choices[0]);
      const row = (await channelOf(h, account))!;
      const rest = row.signed_max_usdc! - row.charged_usdc;
      assert.equal(row.signed_max_usdc, firstCeiling);
      assert.ok(rest > 0);

      // Its next request happens to cost exactly that rest: "charged + ceiling" is the spent voucher.
      const next = await requestCosting(h, rest);
      assert.ok(next, `a request whose ceiling is ${rest}`);
      let status = 200;
      let reason = '';
      try {
        await payer.openai.chat.completions.create(next as typeof firstBody);
      } catch (err) {
        status = (err as { status?: number }).status ?? -1;
        reason = String((err as { message?: string }).message).slice(0, 300);
      }
      await assertLedgerConsistent(h.gw.services.storage.db);
      const spent = await h.gw.services.storage.db.selectFrom('channel_spent_vouchers').select('max_usdc').where('channel_id', '=', row.channel_id).execute();
      assert.equal(
        status,
        200,
        `the payer's own stock client signed charged ${row.charged_usdc} + ceiling ${rest} = ${row.signed_max_usdc} (its last voucher's maximum) and was refused (${status}: ${reason}); charges so far: ${(await channelCharges(h, row.channel_id)).join(', ')}; spent vouchers: ${spent.map((r) => Number(r.max_usdc)).join(', ')}`,
      );
      const after = (await channelOf(h, account))!;
      const charges = await channelCharges(h, row.channel_id);
      const secondCharge = after.charged_usdc - row.charged_usdc;
      assert.ok(secondCharge > 0 && secondCharge <= rest, `charged ${secondCharge}, at most its ceiling of ${rest}`);
      assert.equal(after.signed_max_usdc, row.signed_max_usdc! + 1, 'its voucher signs one micro-USDC above the spent one');

      // The next request: the stock client kept the stated (raised) amount, not the receipt's (it adopts only its own
      // amount plus the charge), so it pays after one more corrective 402, on the true amount.
      const third = await payer.openai.chat.completions.create(CHAT_BODY);
      assert.ok(third.choices[0]);
      const last = (await channelOf(h, account))!;
      assert.equal(last.signed_max_usdc! - Number((await usdcOffer(h, CHAT_BODY)).amount), after.charged_usdc, 'the third voucher is "charged + ceiling"');
      assert.equal((await channelCharges(h, row.channel_id)).length, charges.length + 1);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
