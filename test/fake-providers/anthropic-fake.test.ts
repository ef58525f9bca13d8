import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createParser } from 'eventsource-parser';
import { startFakeAnthropic, type FakeAnthropic, type FakeAnthropicBehaviour } from '../../src/fake-providers/fake-anthropic.ts';
import { anthropicHeaders } from '../../src/providers/anthropic/headers.ts';
import { toAnthropicRequest } from '../../src/protocols/anthropic-messages/encode-request.ts';
import { fromAnthropicResponse } from '../../src/protocols/anthropic-messages/decode-answer.ts';
import { AnthropicStreamTranslator, type ChatCompletionChunk, type StreamOutput } from '../../src/protocols/anthropic-messages/decode-stream.ts';
import { assembleChunks } from '../support/assemble-chunks.ts';

const KEY = 'sk-ant-fake-key';
const body = (extra: Record<string, unknown> = {}) => ({
  model: 'claude-test',
  max_tokens: 200,
  messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
  ...extra,
});

interface SseEvent {
  event: string | undefined;
  data: string;
}

/** POSTs to the fake and reads the whole reply; SSE replies are split into events with a spec-correct parser. */
async function post(fake: FakeAnthropic, payload: unknown, headers: Record<string, string> = anthropicHeaders({ apiKey: KEY })) {
  const res = await fetch(`${fake.url}/v1/messages`, { method: 'POST', headers, body: JSON.stringify(payload) });
  const text = await res.text().catch(() => null);
  const events: SseEvent[] = [];
  if (text !== null && res.headers.get('content-type')?.startsWith('text/event-stream')) {
    const parser = createParser({ onEvent: (e) => events.push({ event: e.event, data: e.data }) });
    parser.feed(text);
  }
  return { status: res.status, headers: res.headers, text, events, json: () => JSON.parse(text ?? '') };
}

/** What the pipeline will do with a stream: every event through one translator. */
function translate(events: SseEvent[]) {
  const t = new AnthropicStreamTranslator(1);
  const out: StreamOutput[] = events.flatMap((e) => t.pushData(e.data));
  const chunks = out.filter((o): o is { kind: 'chunk'; chunk: ChatCompletionChunk } => o.kind === 'chunk').map((o) => o.chunk);
  return { t, chunks, errors: out.filter((o) => o.kind === 'error') };
}

describe('fake Anthropic Messages server', () => {
  let fake: FakeAnthropic;
  before(async () => {
    fake = await startFakeAnthropic({ apiKey: KEY, contextLengths: { 'claude-small': 50 } });
  });
  after(() => fake.close());

  test('JSON answer: a message with text, end_turn and usage with the cache terms', async () => {
    fake.behaviour = { content: 'Hello there.', usage: { cache_read_input_tokens: 7 } };
    const r = await post(fake, body());
    assert.equal(r.status, 200);
    assert.match(r.headers.get('request-id') ?? '', /^req_/);
    const m = r.json();
    assert.match(m.id, /^msg_/);
    assert.deepEqual(
      { ...m, id: 'x' },
      {
        id: 'x',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [{ type: 'text', text: 'Hello there.' }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: m.usage.input_tokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 7, output_tokens: 3, service_tier: 'standard' },
      },
    );
    assert.ok(m.usage.input_tokens > 0);
    assert.equal(fake.received.at(-1)?.headers['x-api-key'], KEY);
    assert.equal(fake.received.at(-1)?.headers['anthropic-version'], '2023-06-01');
  });

  test('stream: named events whose name is the data type, in Anthropic order, ending with message_stop', async () => {
    fake.behaviour = { content: 'One two three.' };
    const r = await post(fake, body({ stream: true }));
    assert.equal(r.status, 200);
    assert.match(r.text!, /^event: message_start\ndata: \{"type":"message_start",/);
    assert.ok(r.text!.endsWith('event: message_stop\ndata: {"type":"message_stop"}\n\n'));
    for (const e of r.events) assert.equal(JSON.parse(e.data).type, e.event);
    assert.deepEqual(
      r.events.map((e) => e.event),
      [
        'message_start',
        'ping',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    );
    const last = JSON.parse(r.events.at(-2)!.data);
    assert.deepEqual(last.delta, { stop_reason: 'end_turn', stop_sequence: null });
    assert.equal(last.usage.output_tokens, 4);
  });

  test('output stops at max_tokens with stop_reason max_tokens, and the usage never bills past it', async () => {
    fake.behaviour = { content: 'word '.repeat(100) };
    const m = (await post(fake, body({ max_tokens: 5 }))).json();
    assert.equal(m.stop_reason, 'max_tokens');
    assert.equal(m.usage.output_tokens, 5);
    assert.equal(m.content[0].text.length, 20);
  });

  test('a stop sequence ends the text there with stop_reason stop_sequence', async () => {
    fake.behaviour = { content: 'alpha beta END gamma' };
    const m = (await post(fake, body({ stop_sequences: ['END'] }))).json();
    assert.deepEqual([m.content[0].text, m.stop_reason, m.stop_sequence], ['alpha beta ', 'stop_sequence', 'END']);
  });

  test('thinking comes only when the request enables it, with a signature', async () => {
    fake.behaviour = { reasoning: 'Think first.', content: 'Answer.' };
    assert.deepEqual(
      (await post(fake, body())).json().content.map((b: any) => b.type),
      ['text'],
    );
    const m = (await post(fake, body({ max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 1024 } }))).json();
    assert.equal(m.content[0].type, 'thinking');
    assert.equal(m.content[0].thinking, 'Think first.');
    assert.match(m.content[0].signature, /^[A-Za-z0-9+/]{43}=$/);
  });

  test('errors: Anthropic bodies and statuses for the key, the version header, the body, the path and injected failures', async () => {
    const cases: [Promise<Awaited<ReturnType<typeof post>>>, number, string, RegExp][] = [
      [post(fake, body(), anthropicHeaders({ apiKey: 'sk-ant-wrong' })), 401, 'authentication_error', /x-api-key/],
      [post(fake, body(), anthropicHeaders({})), 401, 'authentication_error', /x-api-key/],
      [post(fake, body(), { 'x-api-key': KEY, 'content-type': 'application/json' }), 400, 'invalid_request_error', /anthropic-version/],
      [post(fake, { model: 'claude-test', messages: [{ role: 'user', content: 'Hi' }] }), 400, 'invalid_request_error', /max_tokens/],
      [
        post(fake, body({ model: 'claude-small', messages: [{ role: 'user', content: 'x'.repeat(1000) }] })),
        400,
        'invalid_request_error',
        /prompt is too long: \d+ tokens > 50 maximum/,
      ],
    ];
    for (const [reply, status, type, message] of cases) {
      const r = await reply;
      assert.equal(r.status, status);
      assert.equal(r.json().type, 'error');
      assert.equal(r.json().error.type, type);
      assert.match(r.json().error.message, message);
    }
    const missing = await fetch(`${fake.url}/v1/complete`, { method: 'POST', headers: anthropicHeaders({ apiKey: KEY }), body: '{}' });
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { type: 'error', error: { type: 'not_found_error', message: 'Not Found' } });
    for (const [status, type] of [
      [429, 'rate_limit_error'],
      [500, 'api_error'],
      [529, 'overloaded_error'],
      [503, 'api_error'],
    ] as const) {
      fake.behaviour = { failStatus: status };
      const r = await post(fake, body({ stream: true }));
      assert.equal(r.status, status);
      assert.equal(r.json().error.type, type);
    }
  });

  test('overloaded_error mid-stream: an error event after some text, which the translator reports as a value', async () => {
    fake.behaviour = { content: 'a b c d e', overloadAfterChunks: 2 };
    const r = await post(fake, body({ stream: true }));
    assert.equal(r.status, 200);
    assert.deepEqual(r.events.at(-1), { event: 'error', data: '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}' });
    const { chunks, errors, t } = translate(r.events);
    assert.equal(assembleChunks(chunks).choices[0].message.content, 'a b ');
    assert.deepEqual(errors, [{ kind: 'error', errorType: 'overloaded_error', message: 'Overloaded' }]);
    assert.equal(t.finished, false);
  });

  test('a cut stream ends without message_stop; the translator knows it is unfinished', async () => {
    fake.behaviour = { content: 'a b c d e', cutAfterChunks: 2 };
    const res = await fetch(`${fake.url}/v1/messages`, {
      method: 'POST',
      headers: anthropicHeaders({ apiKey: KEY }),
      body: JSON.stringify(body({ stream: true })),
    });
    let text = '';
    await assert.rejects(async () => {
      for await (const piece of res.body!) text += Buffer.from(piece).toString('utf8');
    });
    const events: SseEvent[] = [];
    createParser({ onEvent: (e) => events.push({ event: e.event, data: e.data }) }).feed(text);
    const { t, chunks } = translate(events);
    assert.equal(assembleChunks(chunks).choices[0].message.content, 'a b ');
    assert.equal(t.finished, false);
    assert.equal(t.usage, null);
    assert.ok((t.startUsage?.prompt_tokens ?? 0) > 0);
  });

  test('omitUsage: neither the JSON nor the stream carries usage, and the translations report none', async () => {
    fake.behaviour = { omitUsage: true };
    assert.equal('usage' in fromAnthropicResponse((await post(fake, body())).json()), false);
    const { t } = translate((await post(fake, body({ stream: true }))).events);
    assert.equal(t.finished, true);
    assert.equal(t.usage, null);
  });

  test('spacedJson streams still parse the same', async () => {
    fake.behaviour = { content: 'Spaced out.', spacedJson: true };
    const r = await post(fake, body({ stream: true }));
    assert.match(r.text!, /"type": "message_start"/);
    assert.equal(assembleChunks(translate(r.events).chunks).choices[0].message.content, 'Spaced out.');
  });

  test('hang: the connection is accepted and never answered', async () => {
    fake.behaviour = { hang: true };
    await assert.rejects(
      fetch(`${fake.url}/v1/messages`, {
        method: 'POST',
        headers: anthropicHeaders({ apiKey: KEY }),
        body: JSON.stringify(body()),
        signal: AbortSignal.timeout(300),
      }),
      { name: 'TimeoutError' },
    );
  });
});

describe('round trip: an OpenAI request through the fake, streamed and not, gives the same completion', () => {
  let fake: FakeAnthropic;
  before(async () => {
    fake = await startFakeAnthropic({ apiKey: KEY });
  });
  after(() => fake.close());

  const scenarios: [string, FakeAnthropicBehaviour, Record<string, unknown>][] = [
    ['text', { content: 'The quick brown fox jumps.', usage: { cache_creation_input_tokens: 30, cache_read_input_tokens: 900 } }, {}],
    [
      'two tools after text',
      {
        content: 'Let me check.',
        toolCalls: [
          { name: 'weather', input: { city: 'Paris', unit: 'celsius' } },
          { name: 'time', input: {} },
        ],
      },
      {
        tools: [
          { type: 'function', function: { name: 'weather', parameters: { type: 'object' } } },
          { type: 'function', function: { name: 'time' } },
        ],
      },
    ],
    ['thinking', { reasoning: 'Two plus two is four.', content: '4' }, { max_tokens: 4000, reasoning_effort: 'low' }],
    ['cut at max_tokens', { content: 'many words '.repeat(50) }, { max_tokens: 10 }],
  ];

  for (const [name, behaviour, extra] of scenarios) {
    test(name, async () => {
      fake.behaviour = behaviour;
      const chat = {
        model: 'claude-test',
        max_tokens: 500,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Question?' },
        ],
        ...extra,
      };
      const plain = toAnthropicRequest(chat);
      const streamed = toAnthropicRequest({ ...chat, stream: true, stream_options: { include_usage: true } });
      assert.ok(plain.ok && streamed.ok);

      const answer = fromAnthropicResponse((await post(fake, plain.value)).json(), 1);
      const { chunks, errors, t } = translate((await post(fake, streamed.value)).events);
      assert.deepEqual(errors, []);
      assert.equal(t.finished, true);
      const assembled = assembleChunks(chunks);
      // Each request gets its own message id; everything else must match.
      assert.deepEqual({ ...assembled, id: '' }, { ...answer, id: '' });
      assert.ok(answer.usage && answer.usage.completion_tokens > 0);
    });
  }
});
