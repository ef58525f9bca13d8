import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { APIError } from 'openai';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { payPerRequestSuite } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { holdBalance, settledUpto, uptoOpenAI, uptoPayer } from '../../support/upto-pay-per-request.ts';

/** payPerRequest.minUsd's default: every request below 1 cent is offered at 1 cent. */
const CENT = 10_000;
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100, stream: true as const };

/**
 * A paid stream whose provider fails before its first byte, under the spec's stream contract: the
 * 200 and the headers (the exact payment's receipt among them) left before the provider was called,
 * so the failure is the stream's error event, and the money stays exact: an exact payment is
 * credited to the payer's balance and nothing of it is charged; an upto payment settles nothing.
 */
for (const engine of ENGINES) {
  describe(`pay-per-request: a paid stream the provider fails (${engine})`, () => {
    const harness = payPerRequestSuite(engine, { config: { payPerRequest: { enabled: true, upto: true } } });

    test('exact: 200 with the payment receipt, then the error event the SDK raises; the payment is credited, nothing charged', async () => {
      const h = harness();
      const payer = await h.payer(10n);
      h.fake.behaviour = { failStatus: 500 };
      try {
        const { data: stream, response } = await h.openai(payer).chat.completions.create(BODY).withResponse();
        assert.equal(response.status, 200);
        assert.equal(decodePaymentResponseHeader(response.headers.get('payment-response')!).success, true, 'the receipt went out with the headers');
        await assert.rejects(
          (async () => {
            for await (const _ of stream);
          })(),
          (err: unknown) => err instanceof APIError && /provider answered 500.*nothing was charged/.test(err.message),
        );
      } finally {
        h.fake.behaviour = {};
      }
      const wallet = payer.address.toLowerCase();
      const payments = await h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', wallet).execute();
      assert.deepEqual(
        payments.map((p) => [p.status, Number(p.amount_usdc)]),
        [['credited', CENT]],
      );
      const usage = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('wallet', '=', wallet).execute();
      assert.deepEqual(
        usage.map((u) => [u.status, Number(u.charged_usdc)]),
        [['upstream_error', 0]],
      );
      assert.equal(await h.balance(payer.address), CENT, 'the whole payment stays in the balance');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('upto: the error event in a 200, then a settle of 0 that sends no transaction; the payer paid nothing', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      h.fake.behaviour = { failStatus: 500 };
      try {
        const { data: stream, response } = await uptoOpenAI(h, payer).chat.completions.create(BODY).withResponse();
        assert.equal(response.status, 200);
        await assert.rejects(
          (async () => {
            for await (const _ of stream);
          })(),
          (err: unknown) => err instanceof APIError && /nothing was charged/.test(err.message),
        );
      } finally {
        h.fake.behaviour = {};
      }
      const row = await settledUpto(h, payer);
      assert.deepEqual([row.upto_state, row.settle_amount_atomic, row.tx_hash], ['settled', '0', null]);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD, 'nothing left the payer');
      assert.deepEqual(await holdBalance(h, payer), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      assert.equal(await h.balance(payer.address), 0);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
