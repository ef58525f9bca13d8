import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { ENGINES } from '../support/engines.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../support/pay-per-request-harness.ts';
import { USD } from '../support/topup-harness.ts';

/** payPerRequest.minUsd's default: every request below 1 cent is offered at 1 cent. */
const CENT = 10_000;

/** POST /v1/responses without a key: offered, paid and billed exactly as chat completions are. */
for (const engine of ENGINES) {
  describe(`pay-per-request over /v1/responses (${engine})`, () => {
    let h: PayPerRequestHarness;
    before(async () => {
      h = await startPayPerRequestHarness(engine);
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    test('the 402 offer names /v1/responses; the stock openai SDK + @x402/fetch pays it and gets a Response, billed against the payer', async () => {
      const offer = await fetch(`${h.gw.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'fake/chat-small', input: 'hello', max_output_tokens: 100 }) });
      assert.equal(offer.status, 402);
      assert.match((await offer.json()).resource.url ?? '', /\/v1\/responses$/);

      const payer = await h.payer(10n);
      const { data, response } = await h.openai(payer).responses.create({ model: 'fake/chat-small', input: 'hello', max_output_tokens: 100 }).withResponse();
      assert.match(data.output_text, /fake provider/);
      assert.equal(decodePaymentResponseHeader(response.headers.get('payment-response')!).success, true);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD - BigInt(CENT));
      const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged > 0);
      assert.equal(await h.balance(payer.address), CENT - charged, 'the unspent part stays in the balance');
    });
  });
}
