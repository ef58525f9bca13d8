import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { MODELS, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { readServed } from '../support/sse.ts';
import { usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';

/*
 * A model served by an OpenAI-compatible router in front of Claude (OpenRouter), whose operator set
 * the cache prices the router charges: cached reads at 0.1× the prompt, cache writes at 1.25×. The
 * router reports both inside `prompt_tokens` and apart in `prompt_tokens_details`: `cached_tokens`
 * for the reads and `cache_write_tokens` for the writes (openrouter.ai/docs/use-cases/usage-accounting).
 * The defect: the gateway read the reads and not the writes, so every written token was billed
 * (and booked as cost) at the plain prompt price, below what the router charges for it whenever the
 * markup is under 25%: 200 prompt tokens of which 50 read and 100 written, and 10 completion
 * tokens, were charged 210 micro-USDC instead of 240 and booked at a cost of 175 instead of 200.
 * A cache write is what Claude Code's cache_control on its system prompt and tools produces on
 * every new conversation.
 */
const FUNDS = 1_000_000;
const ROUTER_CLAUDE = {
  provider: 'fake',
  name: 'router-claude',
  contextLength: 100_000,
  maxOutputTokens: 4096,
  promptCostPer1M: '1',
  completionCostPer1M: '2',
  cachedPromptCostPer1M: '0.1',
  cacheWriteCostPer1M: '1.25',
};
const USAGE = { prompt_tokens: 200, completion_tokens: 10, cached_tokens: 50 };
const WRITTEN = 100;
/** 50 uncached at 1.2, 50 read at 0.12, 100 written at 1.5, 10 completion at 2.4 (20% over each cost). */
const CHARGE = 50 * 1.2 + 50 * 0.12 + WRITTEN * 1.5 + 10 * 2.4;
const COST = 50 * 1 + 50 * 0.1 + WRITTEN * 1.25 + 10 * 2;
/** OpenRouter's usage: the writes beside the reads in prompt_tokens_details. */
const withWrites = (json: string) =>
  json.replace('"prompt_tokens_details":{"cached_tokens":50,', `"prompt_tokens_details":{"cached_tokens":50,"cache_write_tokens":${WRITTEN},`);

describe("an OpenAI-compatible router's cache writes (prompt_tokens_details.cache_write_tokens)", () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { models: [...MODELS, ROUTER_CLAUDE] });
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const stream of [false, true]) {
    test(`${stream ? 'stream' : 'JSON'}: written tokens are billed at the cache-write price, and booked at its cost`, async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, rewriteAnswer: withWrites, rewriteChunk: withWrites };
      const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'fake/router-claude',
          messages: [{ role: 'user', content: 'hi' }],
          stream,
          ...(stream ? { stream_options: { include_usage: true } } : {}),
        }),
      });
      assert.equal(res.status, 200);
      const served = await readServed(res);
      assert.match(served.text ?? served.events.join('\n'), /"cache_write_tokens":100/, 'the provider reported its writes');
      const row = stream ? await waitForUsageRow(h, w.keyId) : (await usageRowsOf(h, w.keyId))[0]!;
      assert.deepEqual([row.status, Number(row.charged_usdc), Number(row.provider_cost_usdc)], ['ok', CHARGE, COST]);
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
    });
  }
});
