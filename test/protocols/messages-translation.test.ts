import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeMessagesRequest } from '../../src/protocols/anthropic-messages/decode-request.ts';
import { encodeMessage } from '../../src/protocols/anthropic-messages/encode-answer.ts';
import { anthropicErrorBody } from '../../src/protocols/anthropic-messages/error-body.ts';
import { translatingStreamEncoder } from '../../src/protocols/anthropic-messages/encode-stream.ts';
import { anthropicNativeUpstream } from '../../src/protocols/anthropic-messages/native-upstream.ts';
import type { ChatPlan } from '../../src/metered/plan/plan.ts';
import type { Usage } from '../../src/protocols/internal.ts';
import type { ApiError } from '../../src/refusal.ts';

const USAGE: Usage = { input: { total: 100, cacheRead: 20, cacheWrite: 0 }, output: { total: 50, reasoning: 0 }, estimated: false };
const plan = { model: { upstreamName: 'up' } } as ChatPlan;
const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  JSON.stringify({ id: 'c1', model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] });
const parse = (sse: string) =>
  sse
    .split('\n\n')
    .filter(Boolean)
    .map((b) => JSON.parse(b.split('\n')[1]!.slice(6)));

describe('the Messages codec, piece by piece', () => {
  test('a request decodes to chat completions: system blocks joined, tool results ahead of the text, tools and choices renamed, top_k as a configured extension', () => {
    const body = decodeMessagesRequest(
      {
        model: 'm',
        max_tokens: 10,
        stop_sequences: ['END'],
        temperature: 0.5,
        top_k: 3,
        metadata: { user_id: 'u' },
        system: [
          { type: 'text', text: 'A', cache_control: { type: 'ephemeral' } },
          { type: 'text', text: 'B' },
        ],
        tools: [{ name: 'f', input_schema: { type: 'object' } }],
        tool_choice: { type: 'any', disable_parallel_tool_use: true },
        messages: [
          { role: 'user', content: 'q' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 't', signature: 's' },
              { type: 'text', text: 'calling' },
              { type: 'tool_use', id: 'x', name: 'f', input: { a: 1 } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'then' },
              { type: 'tool_result', tool_use_id: 'x', content: [{ type: 'text', text: 'r' }], is_error: true },
            ],
          },
        ],
      },
      new Set(['top_k']),
    );
    assert.deepEqual(body, {
      model: 'm',
      max_tokens: 10,
      stop: ['END'],
      temperature: 0.5,
      top_k: 3,
      user: 'u',
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      tool_choice: 'required',
      parallel_tool_calls: false,
      messages: [
        { role: 'system', content: 'A\n\nB' },
        { role: 'user', content: [{ type: 'text', text: 'q' }] },
        { role: 'assistant', content: 'calling', tool_calls: [{ id: 'x', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
        { role: 'tool', tool_call_id: 'x', content: 'Error: r' },
        { role: 'user', content: [{ type: 'text', text: 'then' }] },
      ],
    });
  });

  test('a request without max_tokens or with an unknown role is refused naming the field', () => {
    assert.throws(
      () => decodeMessagesRequest({ model: 'm', messages: [{ role: 'user', content: 'q' }] }),
      (e: ApiError) => e.extra.param === 'max_tokens',
    );
    assert.throws(
      () => decodeMessagesRequest({ model: 'm', max_tokens: 5, messages: [{ role: 'tool', content: 'q' }] }),
      (e: ApiError) => e.extra.param === 'messages[0].role',
    );
    assert.throws(
      () => decodeMessagesRequest({ model: 'm', max_tokens: 5, messages: [{ role: 'system', content: [{ type: 'image', source: {} }] }] }),
      (e: ApiError) => e.extra.param === 'messages[0].content',
    );
  });

  test('an answer encodes to an Anthropic message with the billed usage', () => {
    const msg = encodeMessage(
      {
        id: 'c1',
        model: 'm',
        choices: [{ message: { content: 'hi', tool_calls: [{ id: 't', function: { name: 'f', arguments: '{"a":1}' } }] }, finish_reason: 'tool_calls' }],
      },
      USAGE,
    );
    assert.deepEqual(msg, {
      id: 'msg_c1',
      type: 'message',
      role: 'assistant',
      model: 'm',
      stop_reason: 'tool_use',
      stop_sequence: null,
      content: [
        { type: 'text', text: 'hi' },
        { type: 'tool_use', id: 't', name: 'f', input: { a: 1 } },
      ],
      usage: { input_tokens: 80, cache_creation_input_tokens: 0, cache_read_input_tokens: 20, output_tokens: 50 },
    });
  });

  test('a translated stream: one block per kind, tool deltas as input_json_delta, message_delta with the usage at the end', () => {
    const enc = translatingStreamEncoder(plan);
    const out = [
      enc.chunk(chunk({ role: 'assistant', content: '' }), false),
      enc.chunk(chunk({ content: 'He' }), false),
      enc.chunk(chunk({ content: 'llo' }), false),
      enc.chunk(chunk({ tool_calls: [{ index: 0, id: 't', function: { name: 'f', arguments: '' } }] }), false),
      enc.chunk(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] }), false),
      enc.chunk(chunk({}, 'tool_calls'), false),
      enc.chunk('{"choices":[],"usage":{}}', true),
      enc.end(USAGE),
    ].join('');
    assert.deepEqual(
      parse(out).map((e) => (e.type === 'content_block_delta' ? e.delta.type : e.type)),
      [
        'message_start',
        'content_block_start',
        'text_delta',
        'text_delta',
        'content_block_stop',
        'content_block_start',
        'input_json_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    );
    const events = parse(out);
    assert.deepEqual(events[5], { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 't', name: 'f', input: {} } });
    assert.deepEqual(events[8].delta, { stop_reason: 'tool_use', stop_sequence: null });
    assert.ok(out.startsWith('event: message_start\ndata: '));
  });

  test("the native wire keeps the provider's text and events, decoding usage alongside; message_stop and errors are not relayed", () => {
    const text =
      '{"id":"m1", "type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}';
    const answer = anthropicNativeUpstream.decodeAnswer(text);
    assert.ok(answer.ok);
    assert.equal(answer.text, text);
    assert.equal(answer.parsed.usage!.prompt_tokens, 3);
    const d = anthropicNativeUpstream.streamDecoder();
    const start = '{"type":"message_start","message":{"id":"m1","model":"c","usage":{"input_tokens":3,"output_tokens":1}}}';
    assert.deepEqual(d.decode(start).at(-1), { kind: 'native', event: `event: message_start\ndata: ${start}\n\n` });
    assert.ok(d.decode('{"type":"message_stop"}').every((e) => e.kind !== 'native'));
    assert.deepEqual(anthropicNativeUpstream.streamDecoder().decode('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'), [
      { kind: 'error', providerMessage: 'overloaded_error: Overloaded' },
    ]);
  });

  test("errors: Anthropic's shape with the status's type, our code and extras inside error", () => {
    assert.deepEqual(anthropicErrorBody({ status: 402, code: 'INSUFFICIENT_BALANCE', message: 'top up', extra: { balance_usdc: 5 } }), {
      type: 'error',
      error: { balance_usdc: 5, type: 'billing_error', message: 'top up', code: 'INSUFFICIENT_BALANCE' },
    });
    assert.equal((anthropicErrorBody({ status: 503, code: 'X', message: 'm', extra: { type: 'spoof' } }).error as any).type, 'overloaded_error');
  });
});
