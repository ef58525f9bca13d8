import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { CLAUDE_COUNT_MARGIN } from '../../src/metered/count-tokens.ts';
import { countTokens } from '../../src/metered/usage-estimate.ts';
import { startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';

const NATIVE = 'anth/claude-test';
const TRANSLATED = 'fake/chat-small';
const MESSAGES = [{ role: 'user' as const, content: 'What is the weather in Paris?' }];
const TOOLS = [{ name: 'get_weather', description: 'Weather in a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } }];

/**
 * Anthropic adds a system prompt of its own to a request with tools, which the request's text does not
 * show: 346 tokens with tool_choice auto or none and 313 with any or a named tool on the Claude 4
 * family and later (its tool-use pricing docs; none without tools adds nothing). The gateway's
 * count_tokens, an estimate it makes itself, left it out: a client managing its context by the count
 * (Claude Code compacts near the window) was told hundreds of tokens fewer than Anthropic then bills.
 */
describe("count_tokens and Anthropic's tool-use system prompt", () => {
  let h: AnthropicHarness;
  let client: Anthropic;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
    const w = await h.wallet(1_000_000);
    client = new Anthropic({ apiKey: w.key, baseURL: h.gw.url, maxRetries: 0 });
  });
  after(() => h.stop());

  const count = async (model: string, extra: Record<string, unknown> = {}) =>
    (await client.messages.countTokens({ model, messages: MESSAGES, ...extra } as any)).input_tokens;
  /** What the tool definitions and tool_choice themselves may add, at the Claude margin, rounding included. */
  const definitions = async (extra: Record<string, unknown>) =>
    Math.ceil(
      (await countTokens(
        Object.values(extra)
          .map((v) => JSON.stringify(v))
          .join('\n'),
      )) * CLAUDE_COUNT_MARGIN,
    ) + 3;

  for (const [choice, prompt] of [
    [undefined, 346],
    [{ type: 'auto' }, 346],
    [{ type: 'none' }, 346],
    [{ type: 'any' }, 313],
    [{ type: 'tool', name: 'get_weather' }, 313],
  ] as const) {
    test(`an Anthropic model with tools and tool_choice ${JSON.stringify(choice ?? 'unset')}: the count holds the ${prompt}-token tool-use prompt`, async () => {
      const extra = { tools: TOOLS, ...(choice ? { tool_choice: choice } : {}) };
      const added = (await count(NATIVE, extra)) - (await count(NATIVE));
      assert.ok(added >= prompt, `tools added ${added} tokens; Anthropic adds ${prompt} for its tool-use prompt alone`);
      assert.ok(added <= prompt + (await definitions(extra)), `tools added ${added} tokens`);
    });
  }

  test('no tools, or a model no Anthropic deployment serves: nothing added', async () => {
    const noneAlone = (await count(NATIVE, { tool_choice: { type: 'none' } })) - (await count(NATIVE));
    assert.ok(noneAlone < 10, `tool_choice none without tools added ${noneAlone} tokens`);
    const added = (await count(TRANSLATED, { tools: TOOLS })) - (await count(TRANSLATED));
    assert.ok(added < 100, `tools added ${added} tokens on an OpenAI-compatible model`);
    const empty = (await count(NATIVE, { tools: [] })) - (await count(NATIVE));
    assert.ok(empty < 10, `an empty tools list added ${empty} tokens`);
  });
});
