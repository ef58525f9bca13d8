import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { priceRequest } from '../../src/providers/pricing.ts';
import { clientSuite, readSse } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

/*
 * A provider that over-reports usage past 2^53 micro-USDC (a sentinel, a unit mix-up) was charged
 * nothing for a delivered stream: the priced charge was not a safe integer, the ledger refused it,
 * the stream ended with "the gateway failed while streaming" and the sweeper voided the reservation.
 * The price is now clamped to the largest safe integer, so the bill charges what the balance allowed
 * (a key without a spend limit), as for any charge above the reservation.
 */
describe('attack: a provider over-reporting usage beyond a safe integer', () => {
  // The ledger is checked after each test (clientSuite).
  const harness = clientSuite({});

  test('the price of any usage is a safe integer', () => {
    const model = harness().gw.services.catalog.models.find((m) => m.id === 'fake/chat-small')!;
    const priced = priceRequest(model, { promptTokens: 1e16, completionTokens: 1e300 });
    assert.equal(priced.chargeUsdc, Number.MAX_SAFE_INTEGER);
    assert.equal(priced.costUsdc, Number.MAX_SAFE_INTEGER);
  });

  test('stream: the delivered answer is charged what the balance allowed, and the stream ends normally', async () => {
    const h = harness();
    h.fake.behaviour = { usage: { prompt_tokens: 1e16, completion_tokens: 50 } };
    const w = await h.wallet(1_000_000);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
      body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }),
    });
    const events = await readSse(res);
    assert.equal(events.at(-1), '[DONE]');
    assert.ok(!events.some((e) => e.includes('the gateway failed')), events.slice(-3).join('\n'));
    const b = await h.balance(w.account);
    assert.equal(Number(b.locked_usdc), 0, 'nothing left locked');
    assert.ok(1_000_000 - Number(b.balance_usdc) > 0, 'a delivered stream was charged');
  });

  test('JSON: the answer is charged what the balance allowed', async () => {
    const h = harness();
    h.fake.behaviour = { usage: { prompt_tokens: 1e16, completion_tokens: 50 } };
    const w = await h.wallet(1_000_000);
    const res = await call(
      h.gw.url,
      'POST',
      '/v1/chat/completions',
      { model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] },
      { authorization: `Bearer ${w.key}` },
    );
    assert.equal(res.status, 200, res.text);
    const b = await h.balance(w.account);
    assert.ok(1_000_000 - Number(b.balance_usdc) > 0, 'a delivered JSON answer was charged');
    assert.equal(Number(b.locked_usdc), 0);
  });
});
