import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { APICallError, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { clientSuite, type ChatHarness } from '../support/chat-harness.ts';
import { ERROR_CASES, MESSAGES, errorFormatSuite } from '../support/error-cases.ts';

const CONTENT = 'Hello from the fake provider, a stand-in for a paid model.';
const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };
const CHARGE = 60; // 10 × 1.2 + 20 × 2.4

/** The AI SDK's DEFAULT OpenAI provider: `createOpenAI(...)(model)` calls POST /v1/responses. */
const responsesModel = (h: ChatHarness, key: string) => createOpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: key })('chat-small');

const weather = tool({
  description: 'Weather now',
  inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }),
  execute: async ({ city }) => `sunny in ${city}`,
});

describe("the Vercel AI SDK's default createOpenAI()(model) over /v1/responses", () => {
  const harness = clientSuite({ usage: USAGE });

  test('generateText: the text, the usage, the charge', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const result = await generateText({ model: responsesModel(h, w.key), system: 'Be brief.', prompt: 'hi', maxOutputTokens: 40, maxRetries: 0 });
    assert.equal(result.text, CONTENT);
    assert.equal(result.finishReason, 'stop');
    assert.equal(result.usage.inputTokens, 10);
    assert.equal(result.usage.outputTokens, 20);
    assert.equal(h.fake.received[0]!.path, '/v1/chat/completions', 'translated onto chat completions upstream');
    assert.deepEqual(h.fake.received[0]!.body.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
    ]);
    assert.equal(h.fake.received[0]!.body.max_tokens, 40);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });

  test('streamText: the text as it streams, the usage from response.completed', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const result = streamText({ model: responsesModel(h, w.key), prompt: 'hi', maxRetries: 0 });
    let text = '';
    for await (const part of result.textStream) text += part;
    assert.equal(text, CONTENT);
    assert.equal((await result.usage).outputTokens, 20);
    assert.equal(await result.finishReason, 'stop');
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });

  test('a tool loop (store: false): the call, the SDK runs the tool, its result goes back, the final text; each step billed', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'weather', arguments: '{"city":"Paris"}' } };
    let step = 0;
    const result = await generateText({
      model: responsesModel(h, w.key),
      prompt: 'weather in Paris?',
      tools: { weather },
      stopWhen: stepCountIs(2),
      maxRetries: 0,
      providerOptions: { openai: { store: false } },
      prepareStep: () => {
        if (step++ === 1) h.fake.behaviour = { usage: USAGE };
        return {};
      },
    });
    assert.equal(result.text, CONTENT);
    assert.equal(result.steps.length, 2);
    assert.deepEqual(
      result.steps[0]!.toolResults.map((r) => r.output),
      ['sunny in Paris'],
    );
    const second = h.fake.received[1]!.body.messages;
    assert.deepEqual(second.slice(-2), [
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_fake1', content: 'sunny in Paris' },
    ]);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * CHARGE);
  });

  /** The default provider, with the bodies it sends to the gateway recorded. */
  const recordingModel = (h: ChatHarness, key: string, sent: any[]) =>
    createOpenAI({
      baseURL: `${h.gw.url}/v1`,
      apiKey: key,
      fetch: async (url, init) => {
        if (typeof init?.body === 'string') sent.push(JSON.parse(init.body));
        return fetch(url, init);
      },
    })('chat-small');

  test('generateText, two turns with the default store: true: the second refers to the first answer by item_reference, the gateway sends the whole conversation; each turn billed', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const sent: any[] = [];
    const first = await generateText({ model: recordingModel(h, w.key, sent), prompt: 'hi', maxRetries: 0 });
    assert.equal(first.text, CONTENT);
    const second = await generateText({
      model: recordingModel(h, w.key, sent),
      messages: [{ role: 'user', content: 'hi' }, ...first.response.messages, { role: 'user', content: 'and?' }],
      maxRetries: 0,
    });
    assert.equal(second.text, CONTENT);
    assert.equal(sent[1].input[1].type, 'item_reference', 'the SDK sent its earlier answer by reference');
    assert.match(sent[1].input[1].id, /^msg_[0-9a-f]{32}$/);
    assert.deepEqual(h.fake.received[1]!.body.messages, [
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      { role: 'assistant', content: CONTENT },
      { role: 'user', content: [{ type: 'text', text: 'and?' }] },
    ]);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * CHARGE);
  });

  test('streamText, two turns with the default store: true: the streamed answer is stored as its final Response and referred to on the next turn', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const sent: any[] = [];
    const first = streamText({ model: recordingModel(h, w.key, sent), prompt: 'hi', maxRetries: 0 });
    let text = '';
    for await (const part of first.textStream) text += part;
    assert.equal(text, CONTENT);
    const history = (await first.response).messages;
    const second = streamText({
      model: recordingModel(h, w.key, sent),
      messages: [{ role: 'user', content: 'hi' }, ...history, { role: 'user', content: 'and?' }],
      maxRetries: 0,
    });
    let again = '';
    for await (const part of second.textStream) again += part;
    assert.equal(again, CONTENT);
    assert.equal(sent[1].input[1].type, 'item_reference');
    assert.deepEqual(h.fake.received[1]!.body.messages[1], { role: 'assistant', content: CONTENT });
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * CHARGE);
  });

  test('a tool loop with the default store: true, then a next turn: the call and its result go back, the final text by item_reference', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const sent: any[] = [];
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'weather', arguments: '{"city":"Paris"}' } };
    let step = 0;
    const first = await generateText({
      model: recordingModel(h, w.key, sent),
      prompt: 'weather in Paris?',
      tools: { weather },
      stopWhen: stepCountIs(2),
      maxRetries: 0,
      prepareStep: () => {
        if (step++ === 1) h.fake.behaviour = { usage: USAGE };
        return {};
      },
    });
    assert.equal(first.text, CONTENT);
    assert.deepEqual(
      first.steps[0]!.toolResults.map((r) => r.output),
      ['sunny in Paris'],
    );
    assert.deepEqual(h.fake.received[1]!.body.messages.slice(-2), [
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_fake1', content: 'sunny in Paris' },
    ]);
    const third = await generateText({
      model: recordingModel(h, w.key, sent),
      tools: { weather },
      maxRetries: 0,
      messages: [{ role: 'user', content: 'weather in Paris?' }, ...first.response.messages, { role: 'user', content: 'thanks' }],
    });
    assert.equal(third.text, CONTENT);
    // What the SDK sends back of a finished tool loop is its own choice (here: the prompt, the final
    // text by reference, the new turn); each reference reaches the provider as the item it names.
    const refs = sent[2].input.flatMap((item: any, i: number) => (item.type === 'item_reference' ? [i] : []));
    assert.ok(refs.length > 0, JSON.stringify(sent[2].input));
    const upstream = h.fake.received[2]!.body.messages;
    assert.equal(upstream.length, sent[2].input.length);
    for (const i of refs) assert.deepEqual(upstream[i], { role: 'assistant', content: CONTENT });
    assert.deepEqual(upstream.at(-1), { role: 'user', content: [{ type: 'text', text: 'thanks' }] });
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 3 * CHARGE);
  });

  test('providerOptions.openai.store: false still works: the history is sent whole, nothing is kept', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const sent: any[] = [];
    const opts = { providerOptions: { openai: { store: false } } };
    const first = await generateText({ model: recordingModel(h, w.key, sent), prompt: 'hi', maxRetries: 0, ...opts });
    const again = await generateText({
      model: recordingModel(h, w.key, sent),
      messages: [{ role: 'user', content: 'hi' }, ...first.response.messages, { role: 'user', content: 'and?' }],
      maxRetries: 0,
      ...opts,
    });
    assert.equal(again.text, CONTENT);
    assert.equal(sent[1].input[1].role, 'assistant');
    assert.equal((await h.gw.services.storage.db.selectFrom('stored_responses').select('id').where('api_key_id', '=', w.keyId).execute()).length, 0);
  });

  test('streamText: a provider failure inside the stream reaches onError, nothing charged', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: USAGE, cutAfterChunks: 2 };
    const errors: unknown[] = [];
    const result = streamText({ model: responsesModel(h, w.key), prompt: 'hi', maxRetries: 0, onError: ({ error }) => void errors.push(error) });
    let text = '';
    for await (const part of result.textStream) text += part;
    assert.equal(text, 'Hello from ');
    assert.ok(JSON.stringify(errors).includes('the provider closed the connection; nothing was charged'), JSON.stringify(errors));
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS);
  });
});

for (const format of ['spec', 'openai'] as const) {
  describe(`generateText over /v1/responses renders errors.format: ${format}`, () => {
    const harness = errorFormatSuite(format);
    for (const c of ERROR_CASES) {
      test(`${c.status} ${c.code}`, async () => {
        const h = harness();
        const { key, model } = await c.prepare(h);
        const err = await generateText({ model: createOpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: key })(model), prompt: 'hi', maxRetries: 0 }).then(
          () => assert.fail('the call succeeded'),
          (e: unknown) => e,
        );
        assert.ok(APICallError.isInstance(err), String(err));
        assert.equal(err.statusCode, c.status);
        assert.match(err.url, /\/v1\/responses$/);
        const body = JSON.parse(err.responseBody ?? '');
        if (format === 'spec') assert.equal(body.error, c.code);
        else assert.match(err.message, MESSAGES[c.status]);
      });
    }
  });
}
