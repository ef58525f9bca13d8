import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { clientSuite } from '../support/chat-harness.ts';
import { ERROR_CASES, MESSAGES, errorFormatSuite } from '../support/error-cases.ts';
import { rejection } from '../support/openai-rejection.ts';

const CONTENT = 'Hello from the fake provider, a stand-in for a paid model.';
const FUNDS = 1_000_000;
// 10 prompt tokens at 1.2 and 20 completion tokens at 2.4 micro-USDC (1 and 2 plus the 20% markup).
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };
const CHARGE = 60;

/** The Response's `store` (OpenAI sends it; openai-node's type leaves it out). */
const storeOf = (r: object) => (r as { store?: unknown }).store;

const WEATHER = {
  type: 'function' as const,
  name: 'weather',
  description: 'Weather now',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: false,
};

/** openai-node's own Responses calls against the gateway: JSON, streams, the stream helper, tools. */
describe('openai-node responses.*', () => {
  const harness = clientSuite({ usage: USAGE });

  test('responses.create: a Response with the text, usage in Responses names, billed like chat', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const { data: res, response } = await h
      .client(w.key)
      .responses.create({ model: 'chat-small', instructions: 'Be brief.', input: 'hi', max_output_tokens: 50, temperature: 0.5 })
      .withResponse();
    assert.equal(res.object, 'response');
    assert.match(res.id, /^resp_[0-9a-f]{32}$/);
    assert.equal(res.status, 'completed');
    assert.equal(res.output_text, CONTENT, 'the SDK assembles output_text from the message item');
    assert.equal(res.output.length, 1);
    assert.equal(res.output[0]!.type, 'message');
    assert.deepEqual(res.usage, {
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 20,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 30,
      cost: 0.00006,
      charged_usdc: 60,
    });
    assert.equal(response.headers.get('x-tollgate-charged-usdc'), String(CHARGE));

    const sent = h.fake.received[0]!.body;
    assert.deepEqual(sent.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
    ]);
    assert.equal(sent.max_tokens, 50);
    assert.equal(sent.temperature, 0.5);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });

  test('responses.create with stream: true: the Responses event sequence, numbered, ending in response.completed with usage', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const stream = await h
      .client(w.key)
      .responses.create({ model: 'chat-small', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    const types = [...new Set(events.map((e) => e.type))];
    assert.deepEqual(types, [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
    );
    const text = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    assert.equal(text, CONTENT);
    const done = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    assert.equal(done.response.usage!.output_tokens, 20);
    assert.equal(done.response.status, 'completed');
    assert.equal(done.response.id, (events[0] as OpenAI.Responses.ResponseCreatedEvent).response.id);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });

  test('the responses.stream helper: text deltas as events and the final Response', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const stream = h.client(w.key).responses.stream({ model: 'chat-small', input: 'hi' });
    let deltas = '';
    stream.on('response.output_text.delta', (e) => {
      deltas += e.delta;
    });
    const final = await stream.finalResponse();
    assert.equal(deltas, CONTENT);
    assert.equal(final.output_text, CONTENT);
    assert.equal(final.usage!.total_tokens, 30);
  });

  test('function tools round trip: the call comes back as a function_call item, its output goes back as a tool message', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const client = h.client(w.key);
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'weather', arguments: '{"city":"Paris"}' } };
    const first = await client.responses.create({ model: 'chat-small', input: 'weather in Paris?', tools: [WEATHER], tool_choice: 'required' });
    const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    assert.equal(call.name, 'weather');
    assert.equal(call.call_id, 'call_fake1');
    assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' });
    const sentTools = h.fake.received[0]!.body;
    assert.deepEqual(sentTools.tools, [
      { type: 'function', function: { name: 'weather', description: 'Weather now', parameters: WEATHER.parameters, strict: false } },
    ]);
    assert.equal(sentTools.tool_choice, 'required');

    h.fake.behaviour = { usage: USAGE };
    const second = await client.responses.create({
      model: 'chat-small',
      tools: [WEATHER],
      input: [{ role: 'user', content: 'weather in Paris?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
    });
    assert.equal(second.output_text, CONTENT);
    assert.deepEqual(h.fake.received[1]!.body.messages.slice(1), [
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_fake1', content: 'sunny' },
    ]);
  });

  test('a streamed tool call: output_item.added, function_call_arguments.delta and .done, the item in the final Response', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'weather', arguments: '{"city":"Paris"}' } };
    const stream = h.client(w.key).responses.stream({ model: 'chat-small', input: 'weather?', tools: [WEATHER] });
    let args = '';
    stream.on('response.function_call_arguments.delta', (e) => {
      args += e.delta;
    });
    const final = await stream.finalResponse();
    assert.equal(args, '{"city":"Paris"}');
    const item = final.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    assert.deepEqual(
      [item.type, item.name, item.call_id, item.arguments, item.status],
      ['function_call', 'weather', 'call_fake1', '{"city":"Paris"}', 'completed'],
    );
  });

  test('previous_response_id: the earlier input and output are prepended, the chain goes on; billed per turn', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const client = h.client(w.key);
    const first = await client.responses.create({ model: 'chat-small', instructions: 'Be brief.', input: 'hi' });
    assert.equal(storeOf(first), true);
    const second = await client.responses.create({ model: 'chat-small', input: 'and then?', previous_response_id: first.id });
    assert.equal(second.output_text, CONTENT);
    // OpenAI's semantics: the instructions are not carried over, the input and output are.
    assert.deepEqual(h.fake.received[1]!.body.messages, [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: CONTENT },
      { role: 'user', content: 'and then?' },
    ]);
    await client.responses.create({ model: 'chat-small', input: [{ role: 'user', content: 'last' }], previous_response_id: second.id });
    assert.deepEqual(
      h.fake.received[2]!.body.messages.map((m: any) => m.role),
      ['user', 'assistant', 'user', 'assistant', 'user'],
    );
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 3 * CHARGE);
  });

  test('a streamed response is stored as its final Response: retrieve gives what response.completed carried', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const client = h.client(w.key);
    const final = await client.responses.stream({ model: 'chat-small', input: 'hi' }).finalResponse();
    assert.equal(storeOf(final), true);
    const got = await client.responses.retrieve(final.id);
    assert.deepEqual(
      got.output.map((o) => o.id),
      final.output.map((o) => o.id),
      'the same items, by their ids',
    );
    assert.equal(got.output_text, CONTENT);
    assert.deepEqual(got.usage, final.usage);
    const next = await client.responses.create({ model: 'chat-small', input: 'more', previous_response_id: final.id });
    assert.equal(next.output_text, CONTENT);
    assert.deepEqual(h.fake.received[1]!.body.messages[1], { role: 'assistant', content: CONTENT });
  });

  test('responses.retrieve and responses.delete; once deleted, retrieve and previous_response_id are 404 and nothing is reserved', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const client = h.client(w.key);
    const res = await client.responses.create({ model: 'chat-small', input: 'hi' });
    const got = await client.responses.retrieve(res.id);
    assert.deepEqual(got, { ...res, output_text: res.output_text });
    await client.responses.delete(res.id);
    const err = await rejection(client.responses.retrieve(res.id));
    assert.equal(err.status, 404);
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal((await rejection(client.responses.delete(res.id))).status, 404);
    const before = await h.balance(w.account);
    const cont = await rejection(client.responses.create({ model: 'chat-small', input: 'and?', previous_response_id: res.id }));
    assert.equal(cont.status, 404);
    assert.equal(h.fake.received.length, 1);
    assert.deepEqual(await h.balance(w.account), before);
  });

  test('store: false keeps nothing: the Response says store: false and retrieve is 404', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const client = h.client(w.key);
    const res = await client.responses.create({ model: 'chat-small', input: 'hi', store: false });
    assert.equal(storeOf(res), false);
    assert.equal((await rejection(client.responses.retrieve(res.id))).status, 404);
  });

  test('a refusal of the translated body names the Responses field: max_output_tokens, input, reasoning.effort', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ max_output_tokens: 5000 }, 'max_output_tokens', /above fake\/chat-small's limit of 4096/],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/cat.png' }] }] }, 'input', /does not accept images/],
      // Checked where the effort is interpreted (an effort-family model); a model of no family gets it as sent.
      [{ model: 'effort', reasoning: { effort: 'extreme' } }, 'reasoning.effort', /must be one of none, minimal, low, medium, high, xhigh/],
    ];
    for (const [extra, param, message] of cases) {
      const res = await fetch(`${h.gw.url}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', input: 'hi', ...extra }),
      });
      assert.equal(res.status, 400);
      const body = await res.json();
      assert.equal(body.param, param, JSON.stringify(body));
      assert.match(body.message, message);
    }
    assert.equal(h.fake.received.length, 0);
  });

  test('a provider failure mid-stream: an error event and response.failed, nothing charged', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: USAGE, cutAfterChunks: 2 };
    const stream = await h.client(w.key).responses.create({ model: 'chat-small', input: 'hi', stream: true });
    const events: ResponseStreamEvent[] = [];
    // Since openai-node 7.6 ("reject named SSE provider error events") iterating the raw stream throws
    // the `event: error` frame as an APIError instead of yielding it, so the response.failed the
    // gateway sends after it (as OpenAI does) is not seen; the events before it are.
    const err = await rejection(
      (async () => {
        for await (const e of stream) events.push(e);
      })(),
    );
    assert.ok(err instanceof OpenAI.APIError, String(err));
    assert.equal(err.message, 'the provider closed the connection; nothing was charged');
    assert.equal(err.code, 'upstream_error');
    assert.equal(err.status, undefined);
    assert.equal(events[0]!.type, 'response.created');
    assert.equal(
      events.some((e) => e.type === 'response.output_text.delta'),
      true,
      'what arrived before the failure',
    );
    assert.equal(
      events.some((e) => e.type === 'error' || e.type === 'response.failed'),
      false,
    );

    // On the wire: the error event, then response.failed carrying the same message.
    const raw = await fetch(`${h.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', input: 'hi', stream: true }),
    });
    const frames = (await raw.text()).split('\n\n').flatMap((block) =>
      block
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => JSON.parse(l.slice(6))),
    );
    const error = frames.find((e) => e.type === 'error');
    assert.equal(error.message, 'the provider closed the connection; nothing was charged');
    const failed = frames.at(-1);
    assert.equal(failed.type, 'response.failed');
    assert.equal(failed.response.status, 'failed');
    assert.equal(failed.response.error.message, 'the provider closed the connection; nothing was charged');

    // The stream helper rejects on the error event, with its message.
    await assert.rejects(h.client(w.key).responses.stream({ model: 'chat-small', input: 'hi' }).finalResponse(), {
      message: 'the provider closed the connection; nothing was charged',
    });
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS);
  });
});

for (const format of ['spec', 'openai'] as const) {
  describe(`openai-node responses.create renders errors.format: ${format}`, () => {
    const harness = errorFormatSuite(format);
    for (const c of ERROR_CASES) {
      test(`${c.status} ${c.code}`, async () => {
        const h = harness();
        const { key, model } = await c.prepare(h);
        const err = await rejection(h.client(key).responses.create({ model, input: 'hi' }));
        assert.equal(err.status, c.status);
        if (format === 'spec') {
          assert.equal(err.message, `${c.status} "${c.code}"`);
          return;
        }
        assert.match(err.message.slice(`${c.status} `.length), MESSAGES[c.status]);
        assert.equal(err.code, c.code);
      });
    }
  });
}
