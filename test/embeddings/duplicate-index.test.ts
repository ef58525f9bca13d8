import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { routingSuite, type RoutingHarness } from '../support/routing-harness.ts';

/**
 * decodeEmbeddings promises "exactly one vector per input, indexes 0…n-1", and an answer that is not
 * is a 502 with nothing charged. Its duplicate check is `vectors[item.index]` (truthiness): a first
 * vector that is an empty base64 string ("") does not count as taken, so two items at index 0 pass
 * the count check, index 1 stays a hole, and the client is billed for `data: [vector, null]`.
 */
describe('attack: a malformed embeddings answer (duplicate index, empty first vector) is billed and handed out (sqlite)', () => {
  const harness = routingSuite('sqlite', { prompt_tokens: 3, completion_tokens: 0 });
  let h: RoutingHarness;
  beforeEach(() => (h = harness()));

  test('two inputs, two items both at index 0: the answer has a null vector and the wallet paid for it', async () => {
    const w = await h.wallet(1_000_000);
    const data = [
      { object: 'embedding', index: 0, embedding: '' },
      { object: 'embedding', index: 0, embedding: 'AACAPw==' },
    ];
    h.fake.behaviour = { rewriteAnswer: () => JSON.stringify({ object: 'list', data, model: 'x', usage: { prompt_tokens: 3, total_tokens: 3 } }) };
    const res = await fetch(`${h.gw.url}/v1/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/embed-routed', input: ['a', 'b'], encoding_format: 'base64' }),
    });
    const text = await res.text();
    const balance = (await h.balance(w.account)).balance_usdc;
    assert.equal(res.status, 502, `answered ${res.status}: ${text}; wallet charged ${1_000_000 - balance}`);
    assert.equal(balance, 1_000_000);
  });
});
