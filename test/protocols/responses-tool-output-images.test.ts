import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { ONE_PIXEL_PNG, VISION_MODEL } from '../support/vision-model.ts';

const FUNDS = 1_000_000;
const OPENAI_USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4
const PNG_URL = `data:image/png;base64,${ONE_PIXEL_PNG}`;

/** Two parallel calls, the first answered with text and an image (as Codex's view_image answers), the second with text. */
const input = [
  { role: 'user', content: 'Compare the two screenshots' },
  { type: 'function_call', call_id: 'call_a', name: 'view_image', arguments: '{"path":"a.png"}' },
  { type: 'function_call', call_id: 'call_b', name: 'view_image', arguments: '{"path":"b.png"}' },
  {
    type: 'function_call_output',
    call_id: 'call_a',
    output: [
      { type: 'input_text', text: 'a.png' },
      { type: 'input_image', image_url: PNG_URL, detail: 'high' },
    ],
  },
  { type: 'function_call_output', call_id: 'call_b', output: [{ type: 'input_image', image_url: PNG_URL }] },
];

/**
 * A Responses function_call_output may hold images (Codex's view_image tool answers so). Translated to
 * chat completions, whose tool messages carry text only, the images follow the tool messages in one
 * user message; they were a 400 for the rest of the conversation.
 */
describe('Responses function_call_output holding images', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE, VISION_MODEL] });
  });
  beforeEach(() => resetProviders(h, {}, { usage: OPENAI_USAGE }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('an OpenAI-compatible vision model: both tool messages right after the calls, then one user message with the images; billed', async () => {
    const w = await h.wallet(FUNDS);
    const res = await h.client(w.key).responses.create({ model: 'fake/vision-small', input: input as any, store: false });
    assert.equal(res.status, 'completed');
    const sent = h.fake.received.at(-1)!.body.messages;
    assert.deepEqual(
      sent.map((m: any) => m.role),
      ['user', 'assistant', 'tool', 'tool', 'user'],
    );
    assert.deepEqual(sent[2], { role: 'tool', tool_call_id: 'call_a', content: [{ type: 'text', text: 'a.png' }] });
    assert.deepEqual(sent[3], { role: 'tool', tool_call_id: 'call_b', content: '' });
    assert.deepEqual(sent[4].content, [
      { type: 'image_url', image_url: { url: PNG_URL, detail: 'high' } },
      { type: 'image_url', image_url: { url: PNG_URL } },
    ]);
    const b = await h.balance(w.account);
    assert.deepEqual({ balance: b.balance_usdc, locked: b.locked_usdc }, { balance: FUNDS - CHARGE, locked: 0 });
  });

  test('an Anthropic model: the images join the user turn after both tool results', async () => {
    const w = await h.wallet(FUNDS);
    await h.client(w.key).responses.create({ model: 'anth/claude-test', input: input as any, store: false });
    const last = h.anthropic.received.at(-1)!.body.messages.at(-1);
    assert.equal(last.role, 'user');
    assert.deepEqual(
      last.content.map((b: any) => [b.type, b.tool_use_id ?? b.source?.type]),
      [
        ['tool_result', 'call_a'],
        ['tool_result', 'call_b'],
        ['image', 'base64'],
        ['image', 'base64'],
      ],
    );
  });

  test('a text-only model refuses the image by name, before anything is reserved', async () => {
    const w = await h.wallet(FUNDS);
    const res = await fetch(`${h.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/chat-small', input, store: false }),
    });
    assert.equal(res.status, 400);
    assert.match((await res.json()).message, /model fake\/chat-small does not accept images/);
    assert.equal(h.fake.received.length, 0);
  });
});
