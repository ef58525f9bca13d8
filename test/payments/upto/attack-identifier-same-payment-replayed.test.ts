import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { appendPaymentIdentifierToExtensions, generatePaymentId } from '@x402/extensions/payment-identifier';
import { wrapFetchWithPayment } from '@x402/fetch';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { settledUpto, UPTO_BODY, uptoClient, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * The very payment header of an upto request, carrying a payment identifier, sent again while that
 * request runs (a proxy or an agent replaying what it sent): it is the running request's own
 * authorization, which will be settled for that request's charge. It must not run a second time,
 * and what the 409 says about it must be true: it is not "not recorded", and its charge is taken.
 */
for (const engine of ENGINES) {
  describe(`attack: an upto payment header with an identifier replayed while its request runs (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('refused, not run twice, charged once, and the 409 does not say its own payment is not taken', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const id = generatePaymentId();
      const client = uptoClient(h, payer);
      client.onBeforePaymentCreation(async ({ paymentRequired }) => {
        appendPaymentIdentifierToExtensions(paymentRequired.extensions ?? {}, id);
      });
      let header: string | undefined;
      const recording: typeof fetch = async (input, init) => {
        const request = new Request(input, init);
        header ??= request.headers.get('payment-signature') ?? undefined;
        return fetch(request);
      };
      const pay = wrapFetchWithPayment(recording, client);
      h.fake.behaviour = { delayMs: 1500 };
      let first: Promise<Response>;
      let replay;
      const before = h.fake.received.length;
      try {
        first = pay(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(UPTO_BODY) });
        await until(async () => h.fake.received.length === before + 1, 'the first request reached the provider');
        const calls = h.fake.received.length;
        replay = await h.chat(UPTO_BODY, { 'payment-signature': header! });
        assert.equal(h.fake.received.length, calls, 'not run a second time');
      } finally {
        h.fake.behaviour = {};
      }
      assert.equal((await first).status, 200);
      assert.equal(replay.status, 409, replay.text);
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled');
      assert.equal((await uptoPayments(h, payer)).length, 1);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'charged once');
      await assertLedgerConsistent(h.gw.services.storage.db);
      // Its own authorization is the one recorded and charged: the answer may not say otherwise.
      assert.doesNotMatch(replay.body.message, /this upto payment was not recorded, nothing will be taken under it/, replay.body.message);
      assert.match(replay.body.message, /the first request's own upto payment, charged once/, replay.body.message);
    });
  });
}
