import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ENGINES } from '../support/engines.ts';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { usageRowsOf } from '../support/usage-rows.ts';

/**
 * The three inbound protocols bill identically for the same usage. One conversation (a
 * system instruction, a question, at most 100 output tokens) goes through /v1/chat/completions,
 * /v1/responses and /v1/messages, to an OpenAI-compatible and to an Anthropic provider, as JSON and
 * as a stream. Each provider reports the same usage every time, cached parts included, so every
 * request of one (provider, mode) must leave the same usage row and the same ledger charge.
 */
const SYSTEM = 'Be brief.';
const QUESTION = 'What is a toll gate?';
const MAX = 100;
const FUNDS = 5_000_000;

// Cache prices below the prompt price for reads and above it for writes, so a protocol that lost or
// mis-read a cached part would bill differently.
const OPENAI_MODEL = { ...MODELS[0]!, cachedPromptCostPer1M: '0.5' };
const ANTHROPIC_MODEL = { ...CLAUDE, cacheWriteCostPer1M: '1.25', cacheReadCostPer1M: '0.1' };

const bodies = (model: string, stream: boolean): Record<string, { path: string; body: Record<string, unknown> }> => ({
  chat: {
    path: '/v1/chat/completions',
    body: {
      model,
      stream,
      max_tokens: MAX,
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: QUESTION },
      ],
    },
  },
  responses: { path: '/v1/responses', body: { model, stream, max_output_tokens: MAX, instructions: SYSTEM, input: QUESTION } },
  messages: { path: '/v1/messages', body: { model, stream, max_tokens: MAX, system: SYSTEM, messages: [{ role: 'user', content: QUESTION }] } },
});

for (const engine of ENGINES) {
  describe(`the three protocols bill alike (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(engine, { models: [OPENAI_MODEL, ...MODELS.slice(1), ANTHROPIC_MODEL] });
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    const upstreams = [
      {
        name: 'an OpenAI-compatible provider',
        model: 'fake/chat-small',
        reset: () => resetProviders(h, {}, { usage: { prompt_tokens: 40, completion_tokens: 12, cached_tokens: 16 } }),
      },
      {
        name: 'an Anthropic provider',
        model: 'anth/claude-test',
        reset: () => resetProviders(h, { usage: { input_tokens: 30, output_tokens: 12, cache_creation_input_tokens: 8, cache_read_input_tokens: 6 } }),
      },
    ];

    for (const upstream of upstreams) {
      for (const stream of [false, true]) {
        test(`${upstream.name}, ${stream ? 'streamed' : 'JSON'}: the same usage row and charge through each protocol`, async () => {
          upstream.reset();
          const w = await h.wallet(FUNDS);
          for (const [protocol, { path, body }] of Object.entries(bodies(upstream.model, stream))) {
            const res = await fetch(`${h.gw.url}${path}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
              body: JSON.stringify(body),
            });
            const text = await res.text();
            assert.equal(res.status, 200, `${protocol}: ${text}`);
          }
          // A stream is billed when it ends; wait until all three rows are written.
          let rows = await usageRowsOf(h, w.keyId);
          for (let i = 0; rows.length < 3 && i < 200; i++) {
            await new Promise((r) => setTimeout(r, 25));
            rows = await usageRowsOf(h, w.keyId);
          }
          assert.equal(rows.length, 3);
          const billed = rows.map((r) => ({
            prompt: Number(r.prompt_tokens),
            completion: Number(r.completion_tokens),
            cached: Number(r.cached_tokens),
            charged: Number(r.charged_usdc),
            estimated: Boolean(Number(r.estimated)),
          }));
          assert.ok(billed[0]!.charged > 0);
          assert.equal(billed[0]!.estimated, false);
          assert.deepEqual(billed[1], billed[0], 'responses billed like chat completions');
          assert.deepEqual(billed[2], billed[0], 'messages billed like chat completions');
          // The ledger agrees: three equal charges, nothing left locked.
          const balance = await h.balance(w.account);
          assert.deepEqual(balance, { balance_usdc: FUNDS - 3 * billed[0]!.charged, locked_usdc: 0, available_usdc: FUNDS - 3 * billed[0]!.charged });
          await h.gw.assertLedger();
        });
      }
    }
  });
}
