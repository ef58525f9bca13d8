import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { finishReason } from '../../src/protocols/anthropic-messages/finish-reason.ts';
import { anthropicHeaders } from '../../src/providers/anthropic/headers.ts';
import { fromAnthropicResponse } from '../../src/protocols/anthropic-messages/decode-answer.ts';
import type { AnthropicResponse } from '../../src/protocols/anthropic-messages/types.ts';
import { translateUsage } from '../../src/protocols/anthropic-messages/decode-usage.ts';

const message = (extra: Partial<AnthropicResponse>): AnthropicResponse => ({
  id: 'msg_01',
  type: 'message',
  role: 'assistant',
  model: 'claude-sonnet-4-5',
  content: [],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  ...extra,
});

describe('Anthropic message → OpenAI chat.completion', () => {
  test('text blocks join into content; end_turn is stop; usage in OpenAI terms', () => {
    const out = fromAnthropicResponse(
      message({
        content: [
          { type: 'text', text: 'Hello ' },
          { type: 'text', text: 'there.' },
        ],
      }),
      1700000000,
    );
    assert.deepEqual(out, {
      id: 'msg_01',
      object: 'chat.completion',
      created: 1700000000,
      model: 'claude-sonnet-4-5',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there.', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: {
        prompt_tokens: 10,
        completion_tokens: 5,
        total_tokens: 15,
        prompt_tokens_details: { cached_tokens: 0 },
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
      },
    });
  });

  test('tool_use blocks become tool_calls with JSON-string arguments; content is null without text', () => {
    const out = fromAnthropicResponse(
      message({
        stop_reason: 'tool_use',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'toolu_2', name: 'time', input: {} },
        ],
      }),
    );
    const choice = out.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.deepEqual(choice.message.tool_calls, [
      { id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
      { id: 'toolu_2', type: 'function', function: { name: 'time', arguments: '{}' } },
    ]);
  });

  test('thinking is reasoning_content, and the signed blocks ride along to be sent back', () => {
    const thinking = { type: 'thinking' as const, thinking: 'Let me think.', signature: 'sig' };
    const redacted = { type: 'redacted_thinking' as const, data: 'opaque' };
    const out = fromAnthropicResponse(message({ content: [thinking, redacted, { type: 'text', text: '42' }] }));
    assert.equal(out.choices[0].message.reasoning_content, 'Let me think.');
    assert.deepEqual(out.choices[0].message.thinking_blocks, [thinking, redacted]);
    assert.equal(out.choices[0].message.content, '42');
  });

  test('an answer without usage, or missing either count, has no usage (the gateway then estimates it)', () => {
    const { usage: _, ...noUsage } = message({ content: [{ type: 'text', text: 'x' }] });
    assert.equal('usage' in fromAnthropicResponse(noUsage as AnthropicResponse), false);
    assert.equal('usage' in fromAnthropicResponse(message({ usage: { input_tokens: 4 } })), false);
    assert.equal('usage' in fromAnthropicResponse(message({ usage: { output_tokens: 4 } })), false);
  });

  test('an empty answer is an empty string, not null', () => {
    assert.equal(fromAnthropicResponse(message({ content: [] })).choices[0].message.content, '');
  });
});

describe('stop reasons and usage', () => {
  test('each stop_reason maps to the finish_reason OpenAI clients branch on', () => {
    assert.equal(finishReason('end_turn'), 'stop');
    assert.equal(finishReason('stop_sequence'), 'stop');
    assert.equal(finishReason('max_tokens'), 'length');
    assert.equal(finishReason('tool_use'), 'tool_calls');
    assert.equal(finishReason('refusal'), 'content_filter');
    assert.equal(finishReason('model_context_window_exceeded'), 'length');
    assert.equal(finishReason('pause_turn'), 'stop');
    assert.equal(finishReason('something_new'), 'stop');
    assert.equal(finishReason(null), null);
  });

  test('prompt tokens include both cache terms, which also stay apart for their own prices', () => {
    assert.deepEqual(translateUsage({ input_tokens: 20, cache_creation_input_tokens: 300, cache_read_input_tokens: 4000, output_tokens: 7 }), {
      prompt_tokens: 4320,
      completion_tokens: 7,
      total_tokens: 4327,
      prompt_tokens_details: { cached_tokens: 4000 },
      cache_creation_input_tokens: 300,
      cache_read_input_tokens: 4000,
    });
  });

  test('missing, null or nonsense counts are zero, never NaN', () => {
    const u = translateUsage({ input_tokens: 3, cache_creation_input_tokens: null, output_tokens: -1, cache_read_input_tokens: Number.NaN });
    assert.deepEqual([u.prompt_tokens, u.completion_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens], [3, 0, 0, 0]);
  });
});

describe('provider headers', () => {
  test('the key goes in x-api-key, the version defaults to 2023-06-01, betas join with commas', () => {
    assert.deepEqual(anthropicHeaders({ apiKey: 'sk-ant-test', beta: ['prompt-caching-2024-07-31', ' ', 'output-128k-2025-02-19'] }), {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'anthropic-version': '2023-06-01',
      'x-api-key': 'sk-ant-test',
      'anthropic-beta': 'prompt-caching-2024-07-31,output-128k-2025-02-19',
    });
  });

  test('no key, no beta: neither header is sent; the version can be chosen', () => {
    const h = anthropicHeaders({ version: '2024-01-01' });
    assert.equal(h['anthropic-version'], '2024-01-01');
    assert.equal('x-api-key' in h, false);
    assert.equal('anthropic-beta' in h, false);
    assert.equal('authorization' in h, false);
  });
});
