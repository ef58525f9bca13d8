import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';

const FUNDS = 1_000_000;
const USAGE = { input_tokens: 100, output_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4
const ASK = [{ role: 'user' as const, content: 'Why is the sky blue?' }];

/**
 * Anthropic refuses temperature other than 1, any top_k, and top_p below 0.95 beside thinking (its
 * extended-thinking docs, sampling parameters). An OpenAI client asking an Anthropic model for reasoning
 * with its usual sampling settings (LangChain and many apps send temperature by default) got a 502 for
 * each request. The client asked for reasoning: thinking is kept and the incompatible sampling fields
 * are left out of that request.
 */
describe('sampling fields beside reasoning, on an Anthropic model', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', {}, { extraFields: ['top_k'] });
  });
  beforeEach(() => resetProviders(h, { usage: USAGE, reasoning: 'Light scatters.', content: 'Rayleigh scattering.' }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('chat completions, reasoning_effort with temperature, top_p and top_k: answered with thinking; the sampling fields are not sent; billed', async () => {
    const w = await h.wallet(FUNDS);
    const completion = await h.client(w.key).chat.completions.create({
      model: 'anth/claude-test',
      max_tokens: 2048,
      reasoning_effort: 'low',
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      messages: ASK,
    } as any);
    assert.equal(completion.choices[0]!.message.content, 'Rayleigh scattering.');
    const sent = h.anthropic.received.at(-1)!.body;
    assert.deepEqual(sent.thinking, { type: 'enabled', budget_tokens: 1024 });
    assert.deepEqual([sent.temperature, sent.top_p, sent.top_k], [undefined, undefined, undefined]);
    const b = await h.balance(w.account);
    assert.deepEqual({ balance: b.balance_usdc, locked: b.locked_usdc }, { balance: FUNDS - CHARGE, locked: 0 });
  });

  test('Responses, reasoning.effort with temperature: answered with thinking (streamed too)', async () => {
    const w = await h.wallet(FUNDS);
    const client = h.client(w.key);
    const res = await client.responses.create({
      model: 'anth/claude-test',
      max_output_tokens: 2048,
      reasoning: { effort: 'medium' },
      temperature: 0.7,
      input: 'Why?',
      store: false,
    });
    assert.equal(res.output_text, 'Rayleigh scattering.');
    assert.equal(h.anthropic.received.at(-1)!.body.temperature, undefined);
    assert.equal(h.anthropic.received.at(-1)!.body.thinking.type, 'enabled');
    const stream = await client.responses.create({
      model: 'anth/claude-test',
      max_output_tokens: 2048,
      reasoning: { effort: 'low' },
      temperature: 0,
      input: 'Why?',
      store: false,
      stream: true,
    });
    let done: any;
    for await (const event of stream) if (event.type === 'response.completed') done = event.response;
    assert.equal(done?.output_text ?? done?.output?.[0]?.content?.[0]?.text, 'Rayleigh scattering.');
  });

  test('values thinking takes go through: temperature 1, top_p 0.95', async () => {
    const w = await h.wallet(FUNDS);
    await h
      .client(w.key)
      .chat.completions.create({ model: 'anth/claude-test', max_tokens: 2048, reasoning_effort: 'low', temperature: 1, top_p: 0.95, messages: ASK });
    const sent = h.anthropic.received.at(-1)!.body;
    assert.deepEqual([sent.temperature, sent.top_p, sent.thinking?.type], [1, 0.95, 'enabled']);
  });

  test('without reasoning, or where thinking is left off (a forced tool), the sampling fields go through as sent', async () => {
    const w = await h.wallet(FUNDS);
    await h
      .client(w.key)
      .chat.completions.create({ model: 'anth/claude-test', max_tokens: 2048, temperature: 0.2, top_p: 0.5, top_k: 5, messages: ASK } as any);
    let sent = h.anthropic.received.at(-1)!.body;
    assert.deepEqual([sent.temperature, sent.top_p, sent.top_k, sent.thinking], [0.2, 0.5, 5, undefined]);
    h.anthropic.behaviour = { usage: USAGE, toolCalls: [{ name: 'f', input: {} }] };
    await h.client(w.key).chat.completions.create({
      model: 'anth/claude-test',
      max_tokens: 2048,
      reasoning_effort: 'low',
      temperature: 0.2,
      messages: ASK,
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
      tool_choice: 'required',
    });
    sent = h.anthropic.received.at(-1)!.body;
    assert.deepEqual([sent.temperature, sent.thinking], [0.2, undefined]);
  });
});
