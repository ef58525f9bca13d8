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

describe('the Vercel AI SDK\'s default createOpenAI()(model) over /v1/responses', () => {
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
    assert.deepEqual(h.fake.received[0]!.body.messages, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
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
      model: responsesModel(h, w.key), prompt: 'weather in Paris?', tools: { weather }, stopWhen: stepCountIs(2), maxRetries: 0,
      providerOptions: { openai: { store: false } },
      prepareStep: () => {
        if (step++ === 1) h.fake.behaviour = { usage: USAGE };
        return {};
      },
    });
    assert.equal(result.text, CONTENT);
    assert.equal(result.steps.length, 2);
    assert.deepEqual(result.steps[0]!.toolResults.map((r) => r.output), ['sunny in Paris']);
    const second = h.fake.received[1]!.body.messages;
    assert.deepEqual(second.slice(-2), [
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_fake1', content: 'sunny in Paris' },
    ]);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * CHARGE);
  });

  test('a second turn with the default store: true: the SDK refers to its earlier answer by item_reference, a 400 that says to send store: false', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const first = await generateText({ model: responsesModel(h, w.key), prompt: 'hi', maxRetries: 0 });
    const err = await generateText({ model: responsesModel(h, w.key), messages: [{ role: 'user', content: 'hi' }, ...first.response.messages, { role: 'user', content: 'and?' }], maxRetries: 0 }).then(
      () => assert.fail('the second turn succeeded'),
      (e: unknown) => e,
    );
    assert.ok(APICallError.isInstance(err), String(err));
    assert.equal(err.statusCode, 400);
    const body = JSON.parse(err.responseBody ?? '');
    assert.equal(body.param, 'input[1]');
    assert.match(body.message, /item_reference.*keeps no conversation state.*providerOptions\.openai\.store to false/);

    const again = await generateText({
      model: responsesModel(h, w.key), messages: [{ role: 'user', content: 'hi' }, ...first.response.messages, { role: 'user', content: 'and?' }], maxRetries: 0,
      providerOptions: { openai: { store: false } },
    });
    assert.equal(again.text, CONTENT);
    assert.deepEqual(h.fake.received.at(-1)!.body.messages[1], { role: 'assistant', content: CONTENT });
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * CHARGE, 'the refused turn cost nothing');
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
