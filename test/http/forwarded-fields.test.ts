import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

/**
 * Were every unknown field forwarded as is, a key holder could buy
 * priority processing, audio output or web search at text prices, or switch an OpenRouter request
 * to another model with `models`. Forwarded fields are an allowlist plus the provider's
 * configured `extraFields`; price-changing values are refused by name.
 */
const MESSAGES = [{ role: 'user' as const, content: 'hi' }];
const FUNDS = 1_000_000;

describe('forwarded fields are an allowlist', () => {
  let h: ChatHarness;
  before(async () => {
    // The fake provider takes vLLM-style extensions; the "other" provider takes none.
    h = await startChatHarness('sqlite', { providers: { fake: { extraFields: ['top_k', 'guided_json', 'models'] } } });
  });
  afterEach(async () => {
    h.fake.behaviour = {};
    await h.gw.assertLedger();
  });
  after(() => h.stop());

  const chat = (key: string, body: Record<string, unknown>) => call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${key}` });

  /** Sends each body, expects 400 matching its pattern with `param` naming the field, and nothing reaching the provider or the wallet. */
  async function expectRefused(cases: [string, Record<string, unknown>, RegExp][], model = 'chat-small') {
    const w = await h.wallet(FUNDS);
    const calls = h.fake.received.length;
    for (const [field, extra, pattern] of cases) {
      const res = await chat(w.key, { model, messages: MESSAGES, ...extra });
      assert.equal(res.status, 400, `${field}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error, 'VALIDATION_ERROR');
      assert.match(res.body.message, pattern, field);
      assert.equal(res.body.param, field);
    }
    assert.equal(h.fake.received.length, calls, 'no refused request reached the provider');
    assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
  }

  test('each price-changing field is a 400 naming it', async () => {
    await expectRefused([
      ['service_tier', { service_tier: 'priority' }, /^service_tier "priority" changes the price per token; send "auto" or "default"/],
      ['service_tier', { service_tier: 'flex' }, /^service_tier "flex" changes the price per token/],
      ['service_tier', { service_tier: 'scale' }, /^service_tier "scale"/],
      ['audio', { audio: { voice: 'alloy', format: 'wav' } }, /^audio is refused: it asks for audio output/],
      ['modalities', { modalities: ['text', 'audio'] }, /^modalities may only be \["text"\]/],
      ['web_search_options', { web_search_options: {} }, /^web_search_options is refused: it turns on web search/],
      ['best_of', { best_of: 4 }, /^best_of is refused: it generates and bills candidates that are not returned/],
      ['prediction', { prediction: { type: 'content', content: 'x' } }, /^prediction is refused: it bills rejected prediction tokens/],
      ['store', { store: true }, /^store: true would keep this conversation on the operator's provider account/],
    ]);
  });

  test('unknown fields and OpenRouter routing fields are a 400 naming them, as OpenAI answers', async () => {
    await expectRefused(
      [
        [
          'foo',
          { foo: 1 },
          /^Unrecognized request argument supplied: foo; this gateway forwards the chat-completions fields listed in docs\/api\.md#forwarded-fields/,
        ],
        ['models', { models: ['openai/gpt-4o', 'anthropic/claude-opus'] }, /^Unrecognized request argument supplied: models/],
        ['plugins', { plugins: [{ id: 'web' }] }, /^Unrecognized request argument supplied: plugins/],
        ['route', { route: 'fallback' }, /^Unrecognized request argument supplied: route/],
        ['provider', { provider: { order: ['x'] } }, /^Unrecognized request argument supplied: provider/],
        ['top_k', { top_k: 5 }, /^Unrecognized request argument supplied: top_k/],
      ],
      'other/shared-name',
    );
    // The SDK sends what it is given; the 400 arrives as its typed error.
    const w = await h.wallet(FUNDS);
    await assert.rejects(
      h.client(w.key).chat.completions.create({ model: 'chat-small', messages: MESSAGES, foo: 'bar' } as OpenAI.ChatCompletionCreateParamsNonStreaming),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError);
        assert.equal(err.status, 400);
        return true;
      },
    );
  });

  test('every allowed field reaches the provider as sent, including price-neutral service_tier, modalities and store values', async () => {
    const w = await h.wallet(FUNDS);
    const fields = {
      temperature: 0.3,
      top_p: 0.9,
      n: 2,
      stop: ['\n\n'],
      presence_penalty: 0.5,
      frequency_penalty: 0.25,
      logit_bias: { '50256': -100 },
      logprobs: true,
      top_logprobs: 2,
      seed: 42,
      user: 'end-user-7',
      max_tokens: 64,
      parallel_tool_calls: false,
      response_format: { type: 'json_object' },
      service_tier: 'default',
      modalities: ['text'],
      store: false,
      metadata: { team: 'a' },
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      tool_choice: 'auto',
      functions: [{ name: 'legacy', parameters: { type: 'object' } }],
      function_call: 'auto',
      prompt_cache_key: 'k1',
      safety_identifier: 'u-hash',
      verbosity: 'low',
      reasoning_effort: 'low',
    };
    await h.client(w.key).chat.completions.create({ model: 'chat-small', messages: MESSAGES, ...fields } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const sent = h.fake.received.at(-1)!.body;
    for (const [k, v] of Object.entries(fields)) assert.deepEqual(sent[k], v, k);
    assert.deepEqual(new Set(Object.keys(sent)), new Set(['model', 'messages', ...Object.keys(fields)]), 'nothing else was added or dropped');
  });

  test('extraFields pass through for their provider only, and their content is inside the reservation', async () => {
    const w = await h.wallet(FUNDS);
    const res = await chat(w.key, { model: 'fake/chat-small', messages: MESSAGES, top_k: 20, models: ['fake-a', 'fake-b'] });
    assert.equal(res.status, 200);
    assert.equal(h.fake.received.at(-1)!.body.top_k, 20);
    assert.deepEqual(h.fake.received.at(-1)!.body.models, ['fake-a', 'fake-b'], 'the operator opted in to models for this provider');

    // A provider extension can carry prompt input (a guided-decoding schema): it is reserved too.
    const poor = await h.wallet(1);
    const plain = await chat(poor.key, { model: 'fake/chat-small', messages: MESSAGES, max_tokens: 10 });
    const guided = await chat(poor.key, { model: 'fake/chat-small', messages: MESSAGES, max_tokens: 10, guided_json: { description: 'g'.repeat(50_000) } });
    assert.equal(guided.status, 402);
    assert.ok(guided.body.required_usdc - plain.body.required_usdc >= 50_000 * 1.2, "the extension's 50 KB is reserved as prompt");
  });

  test('the config refuses extraFields that would smuggle a standard or price-changing field, and non-text inputs without a bound', () => {
    const providers = (extraFields: string[]) => ({ p: { baseUrl: 'http://127.0.0.1:1/v1', extraFields } });
    const m = { provider: 'p', name: 'm', contextLength: 1000, promptCostPer1M: '1', completionCostPer1M: '1' };
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ providers: providers(['service_tier']), models: [m] }, /providers\.p\.extraFields: service_tier is a standard field/],
      [{ providers: providers(['web_search_options']), models: [m] }, /web_search_options turns on web search.*cannot be forwarded/],
      [{ providers: providers(['best_of']), models: [m] }, /best_of generates and bills candidates/],
      [{ providers: providers(['not a name']), models: [m] }, /must be a JSON field name/],
      [
        { providers: providers([]), models: [{ ...m, inputs: ['text', 'image'] }] },
        /models\.0\.partTokenBounds\.image: inputs lists image; give the most prompt tokens one image part can cost/,
      ],
      [
        { providers: providers([]), models: [{ ...m, partTokenBounds: { audio: 100 } }] },
        /models\.0\.inputs: partTokenBounds\.audio is set but inputs does not list audio/,
      ],
      [{ providers: providers([]), models: [{ ...m, inputs: ['image'], partTokenBounds: { image: 10 } }] }, /models\.0\.inputs: must include text/],
      [{ providers: providers([]), models: [{ ...m, inputs: ['text', 'video'] }] }, /models\.0\.inputs/],
    ];
    for (const [raw, pattern] of cases) {
      assert.throws(
        () => parseConfig(raw, {}),
        (err: unknown) => err instanceof ConfigError && pattern.test(err.message),
        JSON.stringify(raw),
      );
    }
    const ok = parseConfig({ providers: providers(['top_k']), models: [{ ...m, inputs: ['text', 'image'], partTokenBounds: { image: 1600 } }] }, {});
    assert.deepEqual(ok.providers.p!.extraFields, ['top_k']);
    assert.deepEqual(ok.models[0]!.partTokenBounds, { image: 1600 });
  });
});
