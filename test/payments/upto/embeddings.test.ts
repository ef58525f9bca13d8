import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { MODELS } from '../../support/chat-harness.ts';
import { EMBEDDING_MODEL, EMBED_ID, expectedVector, fakeTokensOf, MICRO_PER_TOKEN } from '../../support/embeddings-harness.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { call } from '../../support/gateway.ts';
import { holdBalance, settledUpto, uptoOffersOf, uptoOpenAI, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/** payPerRequest.minUsd's default, the floor of an upto charge (capped at the reservation). */
const CENT = 10_000;

/**
 * `POST /v1/embeddings` paid with x402 `upto` by the stock openai SDK over the stock `@x402/fetch`
 * upto client: the 402 offers the reservation as the maximum, and afterwards exactly the charge
 * (the reported tokens at the listed price, at least the floor) arrives on chain.
 */
for (const engine of ENGINES) {
  describe(`pay-per-request embeddings with x402 upto (${engine})`, () => {
    const harness = uptoSuite(engine, { models: [...MODELS, EMBEDDING_MODEL] });

    test('embeddings.create pays with upto; the charge settled is the tokens billed, at least the floor', async () => {
      const h = harness();
      const input = ['paid with upto', 'no API key'];
      const asked = await call(h.gw.url, 'POST', '/v1/embeddings', { model: EMBED_ID, input });
      assert.equal(asked.status, 402, asked.text);
      const offer = uptoOffersOf(asked.body.accepts)[0]!;
      assert.equal(offer.amount, String(asked.body.reserved_usdc), 'the maximum is the reservation');
      const reservation = Number(offer.amount);

      const payer = await uptoPayer(h);
      const { data, response } = await uptoOpenAI(h, payer).embeddings.create({ model: EMBED_ID, input }).withResponse();
      assert.deepEqual(
        data.data.map((d) => d.embedding),
        input.map((t) => expectedVector(t)),
      );
      const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
      assert.equal(charged, Math.max(fakeTokensOf(input) * MICRO_PER_TOKEN, Math.min(CENT, reservation)));

      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      assert.equal(row.onchain_amount_atomic, String(charged), 'what arrived on chain is the charge');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(charged), 'the payer paid exactly the charge');
      assert.deepEqual(await holdBalance(h, payer), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 }, 'the hold wallet is empty again');
      assert.equal(await h.balance(payer.address), 0, "the payer's own balance is untouched");
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
