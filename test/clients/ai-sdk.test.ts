import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { APICallError, generateText, streamText, type LanguageModel } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOpenAI } from '@ai-sdk/openai';
import { ERROR_CASES, MESSAGES, errorFormatSuite } from '../support/error-cases.ts';

/** What the AI SDK shows of the spec shape: Node's reason phrase for the status, nothing more. */
const REASON = { 400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 429: 'Too Many Requests', 502: 'Bad Gateway' };

/** The two ways the AI SDK talks to an OpenAI-compatible server. createOpenAI()(model) would use the Responses API. */
const PROVIDERS: Record<string, (baseURL: string, apiKey: string) => (model: string) => LanguageModel> = {
  '@ai-sdk/openai-compatible': (baseURL, apiKey) => createOpenAICompatible({ name: 'tollgate', baseURL, apiKey }),
  '@ai-sdk/openai .chat()': (baseURL, apiKey) => createOpenAI({ baseURL, apiKey }).chat,
};

async function callError(promise: Promise<unknown>): Promise<APICallError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(APICallError.isInstance(err), String(err));
    return err;
  }
  assert.fail('the call succeeded');
}

for (const format of ['spec', 'openai'] as const) {
  describe(`the Vercel AI SDK renders errors.format: ${format}`, () => {
    const harness = errorFormatSuite(format);

    for (const [providerName, provider] of Object.entries(PROVIDERS)) {
      for (const c of ERROR_CASES) {
        test(`generateText through ${providerName}: ${c.status} ${c.code}`, async () => {
          const h = harness();
          const { key, model } = await c.prepare(h);
          // No retries: the SDK would retry 429 and 5xx and wrap the last error in a RetryError.
          const err = await callError(generateText({ model: provider(`${h.gw.url}/v1`, key)(model), prompt: 'hi', maxRetries: 0 }));
          assert.equal(err.statusCode, c.status);
          const body = JSON.parse(err.responseBody ?? '');
          if (format === 'spec') {
            assert.equal(err.message, REASON[c.status]);
            assert.equal(body.error, c.code, 'the code is only in the raw responseBody');
            return;
          }
          assert.match(err.message, MESSAGES[c.status]);
          assert.equal((err.data as any).error.code, c.code);
          if (c.status === 402) assert.equal(body.balance_usdc, 10, 'balance_usdc is in responseBody');
        });
      }
    }

    test('streamText: a 402 before the stream reaches onError as the same APICallError', async () => {
      const h = harness();
      const { key } = await h.wallet(10);
      const errors: unknown[] = [];
      const result = streamText({
        model: PROVIDERS['@ai-sdk/openai-compatible']!(`${h.gw.url}/v1`, key)('chat-small'),
        prompt: 'hi',
        maxRetries: 0,
        onError: ({ error }) => void errors.push(error),
      });
      let text = '';
      for await (const part of result.textStream) text += part;
      assert.equal(text, '');
      assert.equal(errors.length, 1);
      const err = errors[0] as APICallError;
      assert.ok(APICallError.isInstance(err));
      assert.equal(err.statusCode, 402);
      if (format === 'openai') assert.match(err.message, MESSAGES[402]);
      else assert.equal(err.message, 'Payment Required');
    });

    test('streamText: a provider failure inside the stream reaches onError with its message', async () => {
      const h = harness();
      const w = await h.wallet(1_000_000);
      h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 }, cutAfterChunks: 2 };
      const errors: unknown[] = [];
      const result = streamText({
        model: PROVIDERS['@ai-sdk/openai-compatible']!(`${h.gw.url}/v1`, w.key)('chat-small'),
        prompt: 'hi',
        maxRetries: 0,
        onError: ({ error }) => void errors.push(error),
      });
      let text = '';
      for await (const part of result.textStream) text += part;
      assert.equal(text, 'Hello from ', 'what arrived before the failure');
      assert.equal(errors.length, 1);
      assert.equal(JSON.stringify(errors[0]).includes('the provider closed the connection; nothing was charged'), true, JSON.stringify(errors[0]));
      assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
    });
  });
}
