import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { responsesInbound } from '../../src/protocols/openai-responses/inbound.ts';
import type { ChatPlan } from '../../src/metered/plan/plan.ts';
import { ApiError } from '../../src/refusal.ts';

const plan = { model: { upstreamName: 'up-model' } } as ChatPlan;

/** The events one encoder wrote for these internal chunks, then `end()` (or `failure`). */
function encode(chunks: unknown[], finish: { failure?: string } = {}): any[] {
  const enc = responsesInbound.streamEncoder(plan);
  let text = chunks.map((c) => enc.chunk(JSON.stringify(c), false)).join('');
  text += finish.failure ? enc.failure(finish.failure) : enc.end();
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((b) => JSON.parse(b.split('\n')[1]!.slice('data: '.length)));
}

const delta = (d: Record<string, unknown>, finish_reason: string | null = null) => ({ choices: [{ index: 0, delta: d, finish_reason }] });

describe('the Responses codec', () => {
  test('a request: instructions, messages of every role, function items and tools, translated onto chat', () => {
    const internal = responsesInbound.decodeRequest({
      model: 'm',
      instructions: 'Be brief.',
      max_output_tokens: 50,
      reasoning: { effort: 'low', summary: 'auto' },
      store: true,
      metadata: { a: 'b' },
      text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true }, verbosity: 'low' },
      tool_choice: { type: 'function', name: 'f' },
      tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }],
      input: [
        { role: 'developer', content: 'Use metric units.' },
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'look' },
            { type: 'input_image', image_url: 'data:image/png;base64,AA', detail: 'low' },
          ],
        },
        { role: 'assistant', content: [{ type: 'output_text', text: 'calling' }] },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call', call_id: 'c2', name: 'f', arguments: '{"x":1}' },
        { type: 'function_call_output', call_id: 'c1', output: 'one' },
        { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'two' }] },
      ],
    });
    assert.deepEqual(internal, {
      model: 'm',
      max_tokens: 50,
      reasoning_effort: 'low',
      verbosity: 'low',
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' }, strict: true } },
      tool_choice: { type: 'function', function: { name: 'f' } },
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'system', content: 'Use metric units.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AA', detail: 'low' } },
          ],
        },
        {
          role: 'assistant',
          content: 'calling',
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } },
            { id: 'c2', type: 'function', function: { name: 'f', arguments: '{"x":1}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'one' },
        { role: 'tool', tool_call_id: 'c2', content: [{ type: 'text', text: 'two' }] },
      ],
    });
  });

  test("an unknown field goes on to the chat allowlist (where an operator's extension may be forwarded)", () => {
    assert.deepEqual(responsesInbound.decodeRequest({ model: 'm', input: 'hi', top_k: 5 }), {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      top_k: 5,
    });
  });

  test('a request with no input, or only instructions, is a 400 naming input', () => {
    for (const body of [{ model: 'm' }, { model: 'm', input: [], instructions: 'x' }]) {
      assert.throws(
        () => responsesInbound.decodeRequest(body),
        (e: unknown) => e instanceof ApiError && e.extra.param === 'input',
      );
    }
  });

  test('a JSON answer: message and function_call items, usage renamed, finish_reason length as incomplete', () => {
    const out = JSON.parse(
      responsesInbound.encodeAnswer('', {
        id: 'x',
        model: 'up',
        created: 1700000000,
        choices: [
          {
            index: 0,
            finish_reason: 'length',
            message: {
              role: 'assistant',
              content: 'partial',
              refusal: null,
              tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
            },
          },
        ],
        usage: {
          prompt_tokens: 5,
          completion_tokens: 7,
          total_tokens: 12,
          prompt_tokens_details: { cached_tokens: 2 },
          completion_tokens_details: { reasoning_tokens: 3 },
        },
      }),
    );
    assert.equal(out.status, 'incomplete');
    assert.deepEqual(out.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(out.created_at, 1700000000);
    assert.deepEqual(
      out.output.map((o: any) => o.type),
      ['message', 'function_call'],
    );
    assert.deepEqual(out.output[0].content, [{ type: 'output_text', text: 'partial', annotations: [], logprobs: [] }]);
    assert.deepEqual([out.output[1].call_id, out.output[1].name, out.output[1].arguments], ['c1', 'f', '{}']);
    assert.deepEqual(out.usage, {
      input_tokens: 5,
      input_tokens_details: { cached_tokens: 2 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 3 },
      total_tokens: 12,
    });
  });

  test('a JSON refusal is a refusal content part', () => {
    const out = JSON.parse(
      responsesInbound.encodeAnswer('', { choices: [{ finish_reason: 'stop', message: { content: null, refusal: 'I cannot help with that.' } }] }),
    );
    assert.deepEqual(out.output[0].content, [{ type: 'refusal', refusal: 'I cannot help with that.' }]);
  });

  test('a stream cut at the output limit ends with response.incomplete and the item marked incomplete', () => {
    const events = encode([
      delta({ role: 'assistant', content: '' }),
      delta({ content: 'Hel' }),
      delta({ content: 'lo' }),
      delta({}, 'length'),
      { choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } },
    ]);
    const last = events.at(-1);
    assert.equal(last.type, 'response.incomplete');
    assert.deepEqual(last.response.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(last.response.output[0].status, 'incomplete');
    assert.equal(last.response.usage.output_tokens, 2);
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
    );
  });

  test('text, then two tool calls: each output item opens after the one before it closed, with its own output_index', () => {
    const events = encode([
      delta({ content: 'Let me check.' }),
      delta({ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'a', arguments: '{"x"' } }] }),
      delta({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }),
      delta({ tool_calls: [{ index: 1, id: 'c2', type: 'function', function: { name: 'b', arguments: '{}' } }] }),
      delta({}, 'tool_calls'),
    ]);
    const lifecycle = events
      .filter((e) => /output_item\.(added|done)$/.test(e.type))
      .map((e) => `${e.type.split('.').at(-1)} ${e.output_index} ${e.item.type}`);
    assert.deepEqual(lifecycle, [
      'added 0 message',
      'done 0 message',
      'added 1 function_call',
      'added 2 function_call',
      'done 1 function_call',
      'done 2 function_call',
    ]);
    const final = events.at(-1).response;
    assert.equal(final.status, 'completed');
    assert.deepEqual(
      final.output.map((o: any) => o.arguments ?? o.content[0].text),
      ['Let me check.', '{"x":1}', '{}'],
    );
    assert.equal(final.usage, null, 'no usage chunk: the bill was estimated, and the Response says nothing it does not know');
  });

  test('a streamed refusal: refusal.delta and refusal.done in a refusal part', () => {
    const events = encode([delta({ refusal: 'No' }), delta({ refusal: '.' }), delta({}, 'stop')]);
    assert.deepEqual(
      events.filter((e) => e.type.startsWith('response.refusal')).map((e) => e.delta ?? e.refusal),
      ['No', '.', 'No.'],
    );
    assert.deepEqual(events.at(-1).response.output[0].content, [{ type: 'refusal', refusal: 'No.' }]);
  });

  test('a failure before any chunk still opens the response, so clients that need response.created can read it', () => {
    const events = encode([], { failure: 'the provider answered 500; nothing was charged' });
    assert.deepEqual(
      events.map((e) => e.type),
      ['response.created', 'response.in_progress', 'error', 'response.failed'],
    );
    assert.deepEqual(events[3].response.error, { code: 'server_error', message: 'the provider answered 500; nothing was charged' });
  });
});
