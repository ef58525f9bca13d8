import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { MAX_REPORTED_TOKENS } from '../../src/metered/bounded-usage.ts';
import { priceRequest } from '../../src/providers/pricing.ts';
import { type ChatHarness, clientSuite, readSse, startChatHarness } from '../support/chat-harness.ts';
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

/*
 * The price was clamped, but the token counts were not: they were written as they came to bigint
 * columns (request_usage, and each key's running sums in usage_totals). On PostgreSQL a count past
 * 2^63 failed the settle's write (a delivered stream charged nothing), and one report just below it
 * made every later settle of the key overflow its sums: its honest answers delivered free, for good.
 * Counts are now read as at most 2^32 (src/metered/bounded-usage.ts).
 */
describe('attack: token counts past a 64-bit integer (postgres)', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('postgres');
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  const stream = async (key: string) => {
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }),
    });
    return readSse(res);
  };
  const failed = (events: string[]) => events.some((e) => e.includes('the gateway failed'));

  test('a delivered stream whose usage reports 1e19 prompt tokens is charged, not failed', async () => {
    h.fake.behaviour = { usage: { prompt_tokens: 1e19, completion_tokens: 50 } };
    const w = await h.wallet(1_000_000);
    const events = await stream(w.key);
    assert.ok(!failed(events), events.slice(-2).join('\n'));
    assert.ok(1_000_000 - Number((await h.balance(w.account)).balance_usdc) > 0, 'charged');
    const row = await h.gw.services.storage.db.selectFrom('request_usage').select('prompt_tokens').where('api_key_id', '=', w.keyId).executeTakeFirstOrThrow();
    assert.equal(Number(row.prompt_tokens), MAX_REPORTED_TOKENS);
  });

  test('one over-report near 2^63, then honest requests on the same key: each is charged', async () => {
    const w = await h.wallet(1_000_000);
    // The largest double below 2^63, exactly as JSON carries it.
    h.fake.behaviour = { usage: { prompt_tokens: 2 ** 63 - 1024, completion_tokens: 50 } };
    assert.ok(!failed(await stream(w.key)), 'the over-report itself');
    for (let i = 0; i < 3; i++) {
      await adjustBalance(h.gw.services.storage.db, { wallet: w.account.address, amountUsdc: 1_000_000, note: 'refill' });
      h.fake.behaviour = { usage: { prompt_tokens: 2000, completion_tokens: 50 } };
      assert.ok(!failed(await stream(w.key)), `honest request ${i + 1} failed its settle`);
    }
    const rows = await h.gw.services.storage.db.selectFrom('request_usage').select(['charged_usdc']).where('api_key_id', '=', w.keyId).execute();
    assert.equal(rows.length, 4);
    assert.ok(
      rows.every((r) => Number(r.charged_usdc) > 0),
      JSON.stringify(rows),
    );
  });
});
