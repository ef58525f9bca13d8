import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';

const FUNDS = 1_000_000;
const USAGE = { input_tokens: 100, output_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4
const WEATHER = { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } };

/**
 * Anthropic refuses extended thinking beside a tool_choice that forces a tool ("Thinking may not be
 * enabled when tool_choice forces tool use."): it prefills the assistant turn with the call. A chat or
 * Responses client asking an Anthropic model for reasoning and a required (or named) tool, as the
 * structured-output helpers of LangChain and the AI SDK do, got a 502 for every such request. As for a
 * tool loop's continuation, and as Anthropic's docs advise, thinking is left off for that request.
 */
describe('reasoning beside a forced tool choice, on an Anthropic model', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  beforeEach(() => resetProviders(h, { usage: USAGE, toolCalls: [{ name: 'get_weather', input: { city: 'Paris' } }] }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const choice of ['required', { type: 'function', function: { name: 'get_weather' } }] as const) {
    test(`chat completions, reasoning_effort with tool_choice ${JSON.stringify(choice)}: the call is answered, thinking not sent; billed`, async () => {
      const w = await h.wallet(FUNDS);
      const completion = await h.client(w.key).chat.completions.create({
        model: 'anth/claude-test',
        max_tokens: 2048,
        reasoning_effort: 'low',
        messages: [{ role: 'user', content: 'Weather in Paris?' }],
        tools: [{ type: 'function', function: WEATHER }],
        tool_choice: choice as any,
      });
      assert.equal(
        completion.choices[0]!.message.tool_calls?.[0]?.type === 'function' && completion.choices[0]!.message.tool_calls[0].function.name,
        'get_weather',
      );
      const sent = h.anthropic.received.at(-1)!.body;
      assert.equal(sent.thinking, undefined);
      assert.ok(['any', 'tool'].includes(sent.tool_choice.type));
      const b = await h.balance(w.account);
      assert.deepEqual({ balance: b.balance_usdc, locked: b.locked_usdc }, { balance: FUNDS - CHARGE, locked: 0 });
    });
  }

  test('Responses, reasoning.effort with tool_choice "required": the function_call comes back', async () => {
    const w = await h.wallet(FUNDS);
    const res = await h.client(w.key).responses.create({
      model: 'anth/claude-test',
      max_output_tokens: 2048,
      reasoning: { effort: 'low' },
      input: 'Weather in Paris?',
      tools: [{ type: 'function', strict: false, ...WEATHER }],
      tool_choice: 'required',
      store: false,
    });
    assert.equal(res.output.find((o) => o.type === 'function_call')?.name, 'get_weather');
    assert.equal(h.anthropic.received.at(-1)!.body.thinking, undefined);
  });

  test('adaptive thinking beside tool_choice "required": left off too', async () => {
    const w = await h.wallet(FUNDS);
    await h.client(w.key).chat.completions.create({
      model: 'anth/claude-test',
      max_tokens: 2048,
      thinking: { type: 'adaptive' },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ type: 'function', function: WEATHER }],
      tool_choice: 'required',
    } as any);
    assert.equal(h.anthropic.received.at(-1)!.body.thinking, undefined);
  });

  test('tool_choice "auto" keeps thinking on', async () => {
    const w = await h.wallet(FUNDS);
    await h.client(w.key).chat.completions.create({
      model: 'anth/claude-test',
      max_tokens: 2048,
      reasoning_effort: 'low',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ type: 'function', function: WEATHER }],
      tool_choice: 'auto',
    });
    assert.deepEqual(h.anthropic.received.at(-1)!.body.thinking, { type: 'enabled', budget_tokens: 1024 });
  });
});
