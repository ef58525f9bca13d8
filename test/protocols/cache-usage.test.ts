import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createParser } from 'eventsource-parser';
import { readUsage } from '../../src/protocols/openai-chat/decode-usage.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../../src/fake-providers/fake-anthropic.ts';
import { anthropicHeaders } from '../../src/providers/anthropic/headers.ts';
import { fromAnthropicResponse } from '../../src/protocols/anthropic-messages/decode-answer.ts';
import { AnthropicStreamTranslator } from '../../src/protocols/anthropic-messages/decode-stream.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';
import { priceRequest, reservationFor, tokenCounts } from '../../src/providers/pricing.ts';
import { neutralUsage } from '../../src/protocols/anthropic-messages/decode-usage.ts';

/**
 * Anthropic's published ratios on a $3 / $15 model: cache writes 1.25× input, cache reads 0.1×.
 * With no markup every price is exact micro-USDC per token.
 */
const claude = buildCatalog({
  models: [
    {
      provider: 'anthropic',
      name: 'claude',
      contextLength: 200_000,
      maxOutputTokens: 8192,
      reasoningFamily: 'none',
      created: 0,
      promptCostPer1M: '3',
      completionCostPer1M: '15',
      cacheWriteCostPer1M: '3.75',
      cacheReadCostPer1M: '0.3',
    },
  ],
  pricing: { markupPercent: '0', listedPrices: 'billed' },
}).models[0]!;

/** OpenAI's ratio on gpt-4o: cached reads at half the input price; 20% markup. */
const gpt = buildCatalog({
  models: [
    {
      provider: 'openai',
      name: 'gpt',
      contextLength: 128_000,
      maxOutputTokens: 16384,
      reasoningFamily: 'none',
      created: 0,
      promptCostPer1M: '2.5',
      completionCostPer1M: '10',
      cachedPromptCostPer1M: '1.25',
    },
  ],
  pricing: { markupPercent: '20', listedPrices: 'billed' },
}).models[0]!;

describe('cached tokens read from provider usage and priced', () => {
  test('OpenAI: prompt_tokens_details.cached_tokens is the cached part of prompt_tokens, billed at the cached price', () => {
    const usage = readUsage({ prompt_tokens: 2000, completion_tokens: 100, prompt_tokens_details: { cached_tokens: 1536 } })!;
    assert.deepEqual({ ...usage }, { input: { total: 2000, cacheRead: 1536, cacheWrite: 0 }, output: { total: 100, reasoning: 0 }, estimated: false });
    assert.deepEqual(tokenCounts(usage), { promptTokens: 2000, completionTokens: 100, cachedPromptTokens: 1536, cacheWriteTokens: 0, cacheReadTokens: 0 });
    // 464 × 3 + 1536 × 1.5 + 100 × 12 = 1392 + 2304 + 1200 micro-USDC; cost 464 × 2.5 + 1536 × 1.25 + 100 × 10.
    assert.deepEqual(priceRequest(gpt, tokenCounts(usage)), { chargeUsdc: 4896, costUsdc: 4080, cachedPartsIgnored: false });
  });

  test("Anthropic (the adapter's usage): cache writes and reads at their own prices, reads not priced twice as OpenAI cached reads", async () => {
    const fake: FakeAnthropic = await startFakeAnthropic({ apiKey: 'sk-ant-test' });
    try {
      fake.behaviour = { content: 'Hello.', usage: { input_tokens: 100, cache_creation_input_tokens: 1000, cache_read_input_tokens: 2000, output_tokens: 50 } };
      const post = (stream: boolean) =>
        fetch(`${fake.url}/v1/messages`, {
          method: 'POST',
          headers: anthropicHeaders({ apiKey: 'sk-ant-test' }),
          body: JSON.stringify({ model: 'claude', max_tokens: 100, stream, messages: [{ role: 'user', content: 'Hi' }] }),
        });
      const answer = fromAnthropicResponse(await (await post(false)).json());
      const translator = new AnthropicStreamTranslator(1);
      const parser = createParser({ onEvent: (e) => void translator.pushData(e.data) });
      parser.feed(await (await post(true)).text());

      // 100 × 3 + 1000 × 3.75 + 2000 × 0.3 + 50 × 15 = 300 + 3750 + 600 + 750.
      const expected = { chargeUsdc: 5400, costUsdc: 5400, cachedPartsIgnored: false };
      for (const [path, reported] of [
        ['JSON', answer.usage],
        ['stream', translator.usage],
      ] as const) {
        // What the Anthropic upstream translator's decoders report for it.
        const usage = neutralUsage(reported!);
        const counts = tokenCounts(usage);
        assert.deepEqual(
          [counts.promptTokens, usage.input.cacheRead, counts.cachedPromptTokens, counts.cacheWriteTokens, counts.cacheReadTokens],
          [3100, 2000, 0, 1000, 2000],
          `${path}: the prompt is the sum of all three; the usage row records the reads as cached`,
        );
        assert.deepEqual(priceRequest(claude, counts), expected, path);
        assert.ok(reservationFor(claude, 3100, 50, 1) >= expected.chargeUsdc, `${path}: the reservation covers a prompt that is mostly cache writes`);
      }
    } finally {
      await fake.close();
    }
  });

  test('a prompt written to the cache in full is reserved at the write price, above the prompt price', () => {
    // All 10 000 prompt tokens are cache writes: 10 000 × 3.75 + 100 × 15 micro-USDC.
    const written = priceRequest(claude, { promptTokens: 10_000, completionTokens: 100, cacheWriteTokens: 10_000 }).chargeUsdc;
    assert.equal(written, 39_000);
    assert.equal(reservationFor(claude, 10_000, 100, 1), 39_000);
  });

  test('usage reporting more cached tokens than prompt tokens is priced as prompt-only and flagged', () => {
    const usage = readUsage({ prompt_tokens: 100, completion_tokens: 10, prompt_tokens_details: { cached_tokens: 5000 } })!;
    assert.deepEqual(priceRequest(gpt, tokenCounts(usage)), { chargeUsdc: 100 * 3 + 10 * 12, costUsdc: 100 * 2.5 + 10 * 10, cachedPartsIgnored: true });
  });

  test('malformed cache fields count as zero, never as negative tokens', () => {
    const usage = readUsage({ prompt_tokens: 100, completion_tokens: 10, prompt_tokens_details: { cached_tokens: -50 }, cache_read_input_tokens: 'many' })!;
    const counts = tokenCounts(usage);
    assert.deepEqual([usage.input.cacheRead, counts.cachedPromptTokens, counts.cacheWriteTokens, counts.cacheReadTokens], [0, 0, 0, 0]);
    assert.equal(priceRequest(gpt, counts).chargeUsdc, 100 * 3 + 10 * 12);
  });
});
