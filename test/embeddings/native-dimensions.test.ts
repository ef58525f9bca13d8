import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { countTokens } from '../../src/metered/usage-estimate.ts';
import { MAX_ANSWER_BYTES, MAX_VECTOR_VALUES } from '../../src/embeddings/limits.ts';
import type { ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { MICRO_PER_TOKEN, startEmbeddingsHarness } from '../support/embeddings-harness.ts';
import { usageRowsOf } from '../support/usage-rows.ts';

/**
 * An ordinary OpenAI embeddings request names no `dimensions`, and the model answers at its native
 * size: 2048 inputs to text-embedding-3-large are 6.3 M numbers, an answer over the bytes the
 * gateway reads. The provider was called and billed (~297k tokens for real inputs), the client got a
 * 502 and nothing was charged. Now the bound uses the model's native size before anything is
 * reserved, and a 2xx answer that is still too large (a provider that ignores `dimensions` or
 * `encoding_format`) is charged what the provider billed.
 */
const PRICED = { provider: 'fake', type: 'embedding', contextLength: 8191, promptCostPer1M: '10' };
const MODELS = [
  { ...PRICED, name: 'text-embedding-3-large' },
  // An unknown name with its native size configured.
  { ...PRICED, name: 'embed-wide', dimensions: 2000 },
  // An unknown name without: bounded at the largest size the gateway serves.
  { ...PRICED, name: 'embed-unknown' },
];
const batch = (n: number, text = 'a') => Array.from({ length: n }, () => text);

for (const engine of ENGINES) {
  describe(`attack: embeddings at a model's native size cannot make the provider work unpaid (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startEmbeddingsHarness(engine, { models: MODELS });
    });
    beforeEach(() => {
      h.fake.behaviour = { nativeDimensions: 3072 };
      h.fake.received.length = 0;
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const embed = (key: string, body: Record<string, unknown>) => call(h.gw.url, 'POST', '/v1/embeddings', body, { authorization: `Bearer ${key}` });

    test('2048 inputs to text-embedding-3-large without dimensions: a 400 naming inputs × its native 3072, before any call or reservation', async () => {
      const w = await h.wallet(1_000_000);
      const res = await embed(w.key, { model: 'fake/text-embedding-3-large', input: batch(2048) });
      assert.equal(res.status, 400, res.text.slice(0, 300));
      assert.equal(res.body.param, 'input');
      assert.equal(
        res.body.message,
        `2048 inputs at fake/text-embedding-3-large's native 3072 dimensions (no dimensions named) are 6291456 numbers, above the ${MAX_VECTOR_VALUES} one answer may hold; send at most 1024 inputs per request at this size, or a smaller dimensions (at most 1536 for 2048 inputs)`,
      );
      assert.equal(h.fake.received.length, 0, 'the provider was not called');
      assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
      assert.equal((await usageRowsOf(h, w.keyId)).length, 0, 'nothing was reserved');
    });

    test('a configured native size bounds the batch; a model nobody sized is bounded at 4096', async () => {
      const w = await h.wallet(1_000_000);
      const wide = await embed(w.key, { model: 'fake/embed-wide', input: batch(1573) });
      assert.equal(wide.status, 400);
      assert.match(wide.body.message, /^1573 inputs at fake\/embed-wide's native 2000 dimensions .* send at most 1572 inputs per request/);
      const unknown = await embed(w.key, { model: 'fake/embed-unknown', input: batch(769) });
      assert.equal(unknown.status, 400);
      assert.match(unknown.body.message, /^769 inputs at fake\/embed-unknown's native 4096 dimensions .* send at most 768 inputs per request/);
      assert.equal(h.fake.received.length, 0);
    });

    test('a batch within the bound is served at the native size and billed once', async () => {
      const w = await h.wallet(1_000_000);
      const res = await embed(w.key, { model: 'fake/text-embedding-3-large', input: ['one', 'two'] });
      assert.equal(res.status, 200, res.text.slice(0, 300));
      assert.deepEqual(
        res.body.data.map((d: { embedding: number[] }) => d.embedding.length),
        [3072, 3072],
      );
      const charged = Number(res.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged > 0);
      assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000 - charged);
    });

    describe('a 2xx answer over the read cap is charged what the provider billed', () => {
      const inputs = batch(3, 'lorem ipsum '.repeat(40));
      // The provider's answer padded past the cap: its vectors and, at its end as OpenAI writes it, its usage.
      const oversized = (json: string) => json.replace('{"object":"list",', `{"object":"list","padding":"${'x'.repeat(MAX_ANSWER_BYTES)}",`);

      test('the reported prompt tokens are charged, the client gets a 502 saying so with the charge', async () => {
        const w = await h.wallet(1_000_000);
        h.fake.behaviour = { usage: { prompt_tokens: 321, completion_tokens: 0 }, rewriteAnswer: oversized };
        const res = await embed(w.key, { model: 'fake/text-embedding-3-large', input: inputs });
        const charge = 321 * MICRO_PER_TOKEN;
        assert.equal(res.status, 502);
        assert.match(
          res.body.message,
          new RegExp(`over the ${MAX_ANSWER_BYTES} bytes the gateway reads.* charged ${charge} micro-USDC for 321 prompt tokens; send fewer inputs`),
        );
        assert.equal(res.headers.get('x-tollgate-charged-usdc'), String(charge));
        assert.equal(res.headers.get('x-should-retry'), 'false');
        assert.deepEqual(await h.balance(w.account), { balance_usdc: 1_000_000 - charge, locked_usdc: 0, available_usdc: 1_000_000 - charge });
        const rows = await usageRowsOf(h, w.keyId);
        assert.deepEqual(
          rows.map((r) => [r.status, Number(r.prompt_tokens), Number(r.charged_usdc)]),
          [['answer_too_large', 321, charge]],
        );
      });

      test('an answer whose usage cannot be read is charged the estimate of its inputs, never nothing', async () => {
        const w = await h.wallet(1_000_000);
        h.fake.behaviour = { omitUsage: true, rewriteAnswer: oversized };
        const res = await embed(w.key, { model: 'fake/text-embedding-3-large', input: inputs });
        let estimate = 0;
        for (const text of inputs) estimate += await countTokens(text);
        const charge = estimate * MICRO_PER_TOKEN;
        assert.equal(res.status, 502);
        assert.match(res.body.message, new RegExp(`charged ${charge} micro-USDC for ${estimate} prompt tokens \\(estimated`));
        assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000 - charge);
      });
    });
  });
}
