import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AnthropicStreamTranslator, type ChatCompletionChunk, type StreamOutput } from '../../src/protocols/anthropic-messages/decode-stream.ts';
import { assembleChunks } from '../support/assemble-chunks.ts';

const CREATED = 1700000000;
const start = (usage: Record<string, unknown> = { input_tokens: 25, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 }) => ({
  type: 'message_start',
  message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', content: [], stop_reason: null, stop_sequence: null, usage },
});
const textStart = (index: number) => ({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
const text = (index: number, t: string) => ({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: t } });
const stop = (index: number) => ({ type: 'content_block_stop', index });
const toolStart = (index: number, id: string, name: string) => ({
  type: 'content_block_start',
  index,
  content_block: { type: 'tool_use', id, name, input: {} },
});
const json = (index: number, partial: string) => ({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: partial } });
const delta = (stopReason: string, usage: Record<string, unknown>) => ({
  type: 'message_delta',
  delta: { stop_reason: stopReason, stop_sequence: null },
  usage,
});
const PING = { type: 'ping' };
const END = { type: 'message_stop' };

/** Runs recorded events through one translator (as `data:` JSON text, as they arrive). */
function run(events: unknown[]) {
  const t = new AnthropicStreamTranslator(CREATED);
  const out: StreamOutput[] = events.flatMap((e) => t.pushData(JSON.stringify(e)));
  const chunks = out.filter((o): o is { kind: 'chunk'; chunk: ChatCompletionChunk } => o.kind === 'chunk').map((o) => o.chunk);
  const errors = out.filter((o) => o.kind === 'error');
  return { t, chunks, errors, deltas: chunks.map((c) => c.choices[0]?.delta) };
}

describe('Anthropic stream events → OpenAI chunks', () => {
  test('text: role chunk first, one chunk per text delta, the finish chunk, then the usage chunk', () => {
    const { t, chunks, errors } = run([
      start(),
      PING,
      textStart(0),
      text(0, 'Hello'),
      text(0, ' world'),
      stop(0),
      delta('end_turn', { output_tokens: 12 }),
      END,
    ]);
    assert.deepEqual(errors, []);
    assert.deepEqual(chunks, [
      {
        id: 'msg_1',
        object: 'chat.completion.chunk',
        created: CREATED,
        model: 'claude-sonnet-4-5',
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
      },
      {
        id: 'msg_1',
        object: 'chat.completion.chunk',
        created: CREATED,
        model: 'claude-sonnet-4-5',
        choices: [{ index: 0, delta: { content: 'Hello' }, logprobs: null, finish_reason: null }],
      },
      {
        id: 'msg_1',
        object: 'chat.completion.chunk',
        created: CREATED,
        model: 'claude-sonnet-4-5',
        choices: [{ index: 0, delta: { content: ' world' }, logprobs: null, finish_reason: null }],
      },
      {
        id: 'msg_1',
        object: 'chat.completion.chunk',
        created: CREATED,
        model: 'claude-sonnet-4-5',
        choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }],
      },
      {
        id: 'msg_1',
        object: 'chat.completion.chunk',
        created: CREATED,
        model: 'claude-sonnet-4-5',
        choices: [],
        usage: {
          prompt_tokens: 25,
          completion_tokens: 12,
          total_tokens: 37,
          prompt_tokens_details: { cached_tokens: 0 },
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: 0,
        },
      },
    ]);
    assert.equal(t.finished, true);
    assert.equal(t.usage?.completion_tokens, 12);
  });

  test('two tools after a text block: tool-call deltas keep a 0-based index over tool_use blocks only', () => {
    const { chunks, deltas } = run([
      start(),
      textStart(0),
      text(0, 'Checking.'),
      stop(0),
      toolStart(1, 'toolu_a', 'weather'),
      json(1, ''),
      json(1, '{"city":'),
      json(1, '"Paris"}'),
      stop(1),
      toolStart(2, 'toolu_b', 'time'),
      json(2, '{}'),
      stop(2),
      delta('tool_use', { output_tokens: 40 }),
      END,
    ]);
    assert.deepEqual(
      deltas.filter((d) => d?.tool_calls),
      [
        { tool_calls: [{ index: 0, id: 'toolu_a', type: 'function', function: { name: 'weather', arguments: '' } }] },
        { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] },
        { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] },
        { tool_calls: [{ index: 1, id: 'toolu_b', type: 'function', function: { name: 'time', arguments: '' } }] },
        { tool_calls: [{ index: 1, function: { arguments: '{}' } }] },
      ],
    );
    const done = assembleChunks(chunks);
    assert.equal(done.choices[0].finish_reason, 'tool_calls');
    assert.equal(done.choices[0].message.content, 'Checking.');
    assert.deepEqual(
      done.choices[0].message.tool_calls?.map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)]),
      [
        ['toolu_a', 'weather', { city: 'Paris' }],
        ['toolu_b', 'time', {}],
      ],
    );
  });

  test('thinking: thinking deltas are reasoning_content; the block with its signature closes it', () => {
    const { deltas } = run([
      start(),
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Two plus ' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'two.' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'EqQB' } },
      stop(0),
      { type: 'content_block_start', index: 1, content_block: { type: 'redacted_thinking', data: 'opaque' } },
      stop(1),
      textStart(2),
      text(2, '4'),
      stop(2),
      delta('end_turn', { output_tokens: 30 }),
      END,
    ]);
    assert.deepEqual(deltas.slice(1, -2), [
      { reasoning_content: 'Two plus ' },
      { reasoning_content: 'two.' },
      { thinking_blocks: [{ type: 'thinking', thinking: 'Two plus two.', signature: 'EqQB' }] },
      { thinking_blocks: [{ type: 'redacted_thinking', data: 'opaque' }] },
      { content: '4' },
    ]);
  });

  test('a cut stream: no finish or usage chunk, not finished, the prompt side known from message_start', () => {
    const { t, deltas } = run([start({ input_tokens: 25, cache_read_input_tokens: 100, output_tokens: 1 }), textStart(0), text(0, 'Hel')]);
    assert.deepEqual(deltas, [{ role: 'assistant', content: '' }, { content: 'Hel' }]);
    assert.equal(t.finished, false);
    assert.equal(t.usage, null);
    assert.equal(t.startUsage?.prompt_tokens, 125);
    assert.equal(t.startUsage?.prompt_tokens_details.cached_tokens, 100);
  });

  test('overloaded_error mid-stream becomes an error value after the content already relayed', () => {
    const { t, errors, deltas } = run([start(), textStart(0), text(0, 'Hi'), { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }]);
    assert.deepEqual(deltas, [{ role: 'assistant', content: '' }, { content: 'Hi' }]);
    assert.deepEqual(errors, [{ kind: 'error', errorType: 'overloaded_error', message: 'Overloaded' }]);
    assert.equal(t.finished, false);
  });

  test('message_delta usage (cumulative, with input and cache terms in newer API versions) wins over message_start', () => {
    const { t } = run([
      start({ input_tokens: 0, output_tokens: 1 }),
      delta('max_tokens', { input_tokens: 849, cache_creation_input_tokens: 10, cache_read_input_tokens: null, output_tokens: 47 }),
      END,
    ]);
    assert.deepEqual(t.usage, {
      prompt_tokens: 859,
      completion_tokens: 47,
      total_tokens: 906,
      prompt_tokens_details: { cached_tokens: 0 },
      cache_creation_input_tokens: 10,
      cache_read_input_tokens: 0,
    });
  });

  test('a stream without usage (or with either side missing) ends without a usage chunk: zero is never reported', () => {
    const cases: [Record<string, unknown>, Record<string, unknown>][] = [
      [{}, {}],
      [{}, { output_tokens: 9 }],
      [{ input_tokens: 5 }, { input_tokens: 5 }],
    ];
    for (const [startUsage, deltaUsage] of cases) {
      const { chunks, t } = run([start(startUsage), textStart(0), text(0, 'Hi'), stop(0), delta('end_turn', deltaUsage), END]);
      assert.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'stop');
      assert.equal(
        chunks.some((c) => c.usage),
        false,
        JSON.stringify([startUsage, deltaUsage]),
      );
      assert.equal(t.usage, null);
      assert.equal(t.finished, true);
    }
    const bare = run([{ ...start(), message: { id: 'm', model: 'x' } }, { type: 'message_delta', delta: { stop_reason: 'end_turn' } }, END]);
    assert.equal(
      bare.chunks.some((c) => c.usage),
      false,
    );
  });

  test('ping, server-tool blocks and event types added after this was written produce nothing', () => {
    const { deltas, errors } = run([
      start(),
      PING,
      { type: 'content_block_start', index: 0, content_block: { type: 'server_tool_use', id: 's', name: 'web_search' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'citations_delta' } },
      stop(0),
      { type: 'brand_new_event' },
    ]);
    assert.deepEqual(deltas, [{ role: 'assistant', content: '' }]);
    assert.deepEqual(errors, []);
  });

  test('an event that is not JSON is an error value, not an exception', () => {
    const t = new AnthropicStreamTranslator(CREATED);
    assert.deepEqual(t.pushData('{"type": "message_st'), [
      { kind: 'error', errorType: 'invalid_event', message: 'the provider sent an event that is not JSON' },
    ]);
  });
});
