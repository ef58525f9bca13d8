import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';

const FUNDS = 1_000_000;
const ASK = [{ role: 'user' as const, content: 'Hi' }];

/**
 * OpenAI's reasoning effort is none, minimal, low, medium, high or xhigh (gpt-5.1 takes and defaults to
 * none; xhigh is for the models after gpt-5.1-codex-max, and Codex CLI's model_reasoning_effort can be
 * xhigh). The gateway refused none and xhigh with a 400 on every model. An effort-family model now gets
 * them as sent; on Anthropic, none is no thinking and xhigh the largest budget the mapping uses.
 */
describe('reasoning effort none and xhigh', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  beforeEach(() => resetProviders(h, { usage: { input_tokens: 10, output_tokens: 5 }, content: 'Hello.' }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const effort of ['none', 'xhigh'] as const) {
    test(`chat reasoning_effort ${effort} reaches an effort-family model as sent`, async () => {
      const w = await h.wallet(FUNDS);
      await h.client(w.key).chat.completions.create({ model: 'fake/effort', reasoning_effort: effort, messages: ASK } as any);
      assert.equal(h.fake.received.at(-1)!.body.reasoning_effort, effort);
    });

    test(`Responses reasoning.effort ${effort} reaches an effort-family model as sent`, async () => {
      const w = await h.wallet(FUNDS);
      await h.client(w.key).responses.create({ model: 'fake/effort', reasoning: { effort } as any, input: 'Hi', store: false });
      assert.equal(h.fake.received.at(-1)!.body.reasoning_effort, effort);
    });
  }

  test('on an Anthropic model, none is no thinking and xhigh the largest budget (as high); billed', async () => {
    const w = await h.wallet(FUNDS);
    const client = h.client(w.key);
    await client.chat.completions.create({ model: 'anth/claude-test', max_tokens: 4096, reasoning_effort: 'none', messages: ASK } as any);
    assert.equal(h.anthropic.received.at(-1)!.body.thinking, undefined);
    await client.responses.create({ model: 'anth/claude-test', max_output_tokens: 4096, reasoning: { effort: 'xhigh' } as any, input: 'Hi', store: false });
    assert.deepEqual(h.anthropic.received.at(-1)!.body.thinking, { type: 'enabled', budget_tokens: 4095 });
    const big = await startAnthropicHarness('sqlite', {
      models: [
        {
          provider: 'anth',
          name: 'claude-big',
          upstreamName: 'claude-big',
          contextLength: 200_000,
          maxOutputTokens: 64_000,
          promptCostPer1M: '1',
          completionCostPer1M: '2',
        },
      ],
    });
    try {
      const w2 = await big.wallet(FUNDS);
      big.anthropic.behaviour = { usage: { input_tokens: 10, output_tokens: 5 }, content: 'Hello.' };
      await big.client(w2.key).chat.completions.create({ model: 'anth/claude-big', max_tokens: 32_000, reasoning_effort: 'xhigh', messages: ASK } as any);
      assert.deepEqual(big.anthropic.received.at(-1)!.body.thinking, { type: 'enabled', budget_tokens: 16384 });
      await big.gw.assertLedger();
    } finally {
      await big.stop();
    }
  });

  test('on a thinking-family model, none sends no thinking and xhigh the largest budget', async () => {
    const w = await h.wallet(FUNDS);
    await h.client(w.key).chat.completions.create({ model: 'fake/thinker', reasoning_effort: 'none', messages: ASK } as any);
    assert.deepEqual([h.fake.received.at(-1)!.body.thinking, h.fake.received.at(-1)!.body.reasoning_effort], [undefined, undefined]);
    await h.client(w.key).chat.completions.create({ model: 'fake/thinker', reasoning_effort: 'xhigh', messages: ASK } as any);
    assert.deepEqual(h.fake.received.at(-1)!.body.thinking, { type: 'enabled', budget_tokens: 16384 });
  });

  test("an effort outside OpenAI's set is still refused, naming the set, before anything reaches a provider", async () => {
    const w = await h.wallet(FUNDS);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/effort', reasoning_effort: 'max', messages: ASK }),
    });
    assert.equal(res.status, 400);
    assert.match((await res.json()).message, /reasoning_effort must be one of none, minimal, low, medium, high, xhigh/);
    assert.equal(h.fake.received.length, 0);
  });
});
