import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { ONE_PIXEL_PNG, VISION_MODEL } from '../support/vision-model.ts';

const FUNDS = 1_000_000;
const OPENAI_USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4
const READ_TOOL = { name: 'Read', description: 'Reads a file', input_schema: { type: 'object' as const, properties: { file_path: { type: 'string' } } } };

/**
 * Claude Code's Read tool (and any MCP tool returning a screenshot) answers with a tool_result
 * holding an image block. Translated for an OpenAI-compatible vision model, whose tool messages
 * carry text only, the image must still reach the model: it was a 400 on every later turn, so the
 * conversation could not go on at all.
 */
describe('a Messages tool_result holding an image, for an OpenAI-compatible vision model', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE, VISION_MODEL] });
  });
  beforeEach(() => resetProviders(h, {}, { usage: OPENAI_USAGE }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('the tool result goes on as a tool message and its image as a user image part after it; billed', async () => {
    const w = await h.wallet(FUNDS);
    const client = new Anthropic({ baseURL: h.gw.url, apiKey: w.key, maxRetries: 0 });
    const answer = await client.messages.create({
      model: 'fake/vision-small',
      max_tokens: 300,
      tools: [READ_TOOL],
      messages: [
        { role: 'user', content: 'What is in /tmp/shot.png?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Read', input: { file_path: '/tmp/shot.png' } }] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_1',
              content: [
                { type: 'text', text: 'shot.png' },
                { type: 'image', source: { type: 'base64', media_type: 'image/png', data: ONE_PIXEL_PNG } },
              ],
            },
          ],
        },
      ],
    });
    assert.equal(answer.stop_reason, 'end_turn');
    const sent = h.fake.received.at(-1)!.body;
    assert.deepEqual(sent.messages.slice(-2), [
      { role: 'tool', tool_call_id: 'toolu_1', content: 'shot.png' },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${ONE_PIXEL_PNG}` } }] },
    ]);
    const b = await h.balance(w.account);
    assert.deepEqual({ balance: b.balance_usdc, locked: b.locked_usdc }, { balance: FUNDS - CHARGE, locked: 0 });
  });

  test('an image-only error result: the tool message says it failed, the image follows; a text-only model still refuses the image', async () => {
    const w = await h.wallet(FUNDS);
    const client = new Anthropic({ baseURL: h.gw.url, apiKey: w.key, maxRetries: 0 });
    const messages: Anthropic.MessageParam[] = [
      { role: 'user', content: 'Take a screenshot' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_2', name: 'Read', input: {} }] },
      {
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 'toolu_2',
            is_error: true,
            content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: ONE_PIXEL_PNG } }],
          },
          { type: 'text', text: 'and this?' },
        ],
      },
    ];
    await client.messages.create({ model: 'fake/vision-small', max_tokens: 300, messages });
    const sent = h.fake.received.at(-1)!.body;
    assert.deepEqual(sent.messages.slice(-2), [
      { role: 'tool', tool_call_id: 'toolu_2', content: 'Error: ' },
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: `data:image/png;base64,${ONE_PIXEL_PNG}` } },
          { type: 'text', text: 'and this?' },
        ],
      },
    ]);
    await assert.rejects(client.messages.create({ model: 'fake/chat-small', max_tokens: 300, messages }), (err: any) => {
      assert.equal(err.status, 400);
      assert.match(err.message, /model fake\/chat-small does not accept images/);
      return true;
    });
  });
});
