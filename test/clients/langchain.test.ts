import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { AIMessage, type AIMessageChunk, HumanMessage, SystemMessage, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { clientSuite } from '../support/chat-harness.ts';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { FAKE_ANTHROPIC_CONTENT } from '../../src/fake-providers/fake-anthropic-answer.ts';

/**
 * LangChain JS (@langchain/openai's ChatOpenAI, over Chat Completions and with useResponsesApi, and
 * @langchain/anthropic's ChatAnthropic) against the gateway, each built with nothing but the gateway's
 * URL, a key and a model: invoke, stream, and a tool round trip with bindTools, each billed exactly.
 *
 * What they need beyond a base URL and a key: nothing. Notes on their defaults, as observed here:
 * - ChatOpenAI streams with stream_options.include_usage (its streamUsage default), so a stream is
 *   billed from the provider's usage and usage_metadata is on the last chunk.
 * - ChatOpenAI's base URL ends in /v1 (it is openai-node's); ChatAnthropic's does not (the Anthropic
 *   SDK appends /v1/messages).
 * - ChatAnthropic sends max_tokens 4096 for a model name it does not know, and its own copy of the
 *   Anthropic SDK (@anthropic-ai/sdk 0.x, a dependency of @langchain/anthropic), not the project's.
 * - Both retry through LangChain's own caller (up to 6 retries by default; never on 400-409 or 413,
 *   so not on a 402) while the SDK inside is built with maxRetries 0; the successes here never retry.
 */

const FUNDS = 1_000_000;
const CONTENT = 'Hello from the fake provider, a stand-in for a paid model.';
// 10 prompt tokens at 1.2 and 20 completion tokens at 2.4 micro-USDC (1 and 2 plus the 20% markup).
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };
const CHARGE = 60;

const weather = tool(async ({ city }) => `18°C and sunny in ${city}`, {
  name: 'get_weather',
  description: 'Weather in a city',
  schema: z.object({ city: z.string() }),
});
const WEATHER_PARAMETERS = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };

/** The text of a message whatever shape its content has (a string, or content blocks over Responses). */
function textOf(m: BaseMessage): string {
  return typeof m.content === 'string' ? m.content : m.content.flatMap((b: any) => (b.type === 'text' ? [b.text] : [])).join('');
}

async function collect(stream: AsyncIterable<AIMessageChunk>): Promise<{ chunks: AIMessageChunk[]; full: AIMessageChunk }> {
  const chunks: AIMessageChunk[] = [];
  let full: AIMessageChunk | undefined;
  for await (const c of stream) {
    chunks.push(c);
    full = full ? full.concat(c) : c;
  }
  assert.ok(full, 'the stream yielded chunks');
  return { chunks, full };
}

describe('LangChain ChatOpenAI (Chat Completions) against /v1/chat/completions', () => {
  const harness = clientSuite({ usage: USAGE });
  const chat = (key: string) => new ChatOpenAI({ model: 'chat-small', apiKey: key, configuration: { baseURL: `${harness().gw.url}/v1` } });

  test('invoke: the answer with usage_metadata, billed exactly', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const answer = await chat(w.key).invoke([new SystemMessage('Be brief.'), new HumanMessage('hi')]);
    assert.ok(answer instanceof AIMessage);
    assert.equal(answer.content, CONTENT);
    assert.deepEqual([answer.usage_metadata?.input_tokens, answer.usage_metadata?.output_tokens, answer.usage_metadata?.total_tokens], [10, 20, 30]);
    assert.equal(answer.response_metadata.finish_reason, 'stop');
    const sent = h.fake.received[0]!.body;
    assert.deepEqual(sent.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
    ]);
    assert.equal(sent.stream ?? false, false);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });

  test('stream: the text in chunks, usage on the stream (stream_options.include_usage by default), billed exactly', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const { chunks, full } = await collect(await chat(w.key).stream('hi'));
    assert.ok(chunks.length > 2, `${chunks.length} chunks`);
    assert.equal(full.content, CONTENT);
    assert.deepEqual([full.usage_metadata?.input_tokens, full.usage_metadata?.output_tokens], [10, 20]);
    // What the gateway was asked for and passed on: a stream with usage requested.
    assert.equal(h.fake.received[0]!.body.stream, true);
    assert.deepEqual(h.fake.received[0]!.body.stream_options, { include_usage: true });
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });

  test("bindTools: the tool call comes back parsed, the tool's result goes back as a tool message; each turn billed", async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const model = chat(w.key).bindTools([weather]);
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
    const question = new HumanMessage('weather in Paris?');
    const first = await model.invoke([question]);
    assert.equal(first.tool_calls?.length, 1);
    const call = first.tool_calls![0]!;
    assert.deepEqual([call.name, call.args, call.id], ['get_weather', { city: 'Paris' }, 'call_fake1']);
    const sentTool = h.fake.received[0]!.body.tools[0];
    assert.deepEqual([sentTool.type, sentTool.function.name, sentTool.function.description], ['function', 'get_weather', 'Weather in a city']);
    assert.deepEqual(stripSchemaNoise(h.fake.received[0]!.body.tools[0].function.parameters), WEATHER_PARAMETERS);

    h.fake.behaviour = { usage: USAGE };
    const result = await weather.invoke(call);
    const second = await model.invoke([question, first, result]);
    assert.equal(second.content, CONTENT);
    const [assistant, toolMessage] = h.fake.received[1]!.body.messages.slice(1);
    assert.deepEqual(
      [assistant.role, assistant.tool_calls],
      ['assistant', [{ id: 'call_fake1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]],
    );
    // LangChain names the tool on the tool message (an optional field OpenAI accepts); passed on as sent.
    assert.deepEqual(toolMessage, { role: 'tool', tool_call_id: 'call_fake1', name: 'get_weather', content: '18°C and sunny in Paris' });
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * CHARGE);
  });

  test('a streamed tool call assembles into tool_calls', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
    const { full } = await collect(await chat(w.key).bindTools([weather]).stream('weather in Paris?'));
    assert.deepEqual(
      full.tool_calls?.map((c) => [c.name, c.args, c.id]),
      [['get_weather', { city: 'Paris' }, 'call_fake1']],
    );
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });
});

describe('LangChain ChatOpenAI with useResponsesApi against /v1/responses', () => {
  const harness = clientSuite({ usage: USAGE });
  const chat = (key: string) =>
    new ChatOpenAI({ model: 'chat-small', apiKey: key, useResponsesApi: true, configuration: { baseURL: `${harness().gw.url}/v1` } });

  test('invoke: the answer with usage_metadata, billed exactly', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const answer = await chat(w.key).invoke([new SystemMessage('Be brief.'), new HumanMessage('hi')]);
    assert.equal(textOf(answer), CONTENT);
    // It went through /v1/responses: the Response's id, and the gateway stored it (store defaults to true).
    const id = String(answer.response_metadata.id);
    assert.match(id, /^resp_[0-9a-f]{32}$/);
    assert.equal((await fetch(`${h.gw.url}/v1/responses/${id}`, { headers: { authorization: `Bearer ${w.key}` } })).status, 200);
    assert.deepEqual([answer.usage_metadata?.input_tokens, answer.usage_metadata?.output_tokens], [10, 20]);
    const sent = h.fake.received[0]!.body;
    assert.deepEqual(sent.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
    ]);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });

  test('stream: the text in chunks and usage from response.completed, billed exactly', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const { chunks, full } = await collect(await chat(w.key).stream('hi'));
    assert.ok(chunks.length > 2, `${chunks.length} chunks`);
    assert.equal(textOf(full), CONTENT);
    assert.deepEqual([full.usage_metadata?.input_tokens, full.usage_metadata?.output_tokens], [10, 20]);
    assert.equal(h.fake.received[0]!.body.stream, true);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });

  test('bindTools: a function_call comes back as tool_calls, its result goes back as function_call_output', async () => {
    const h = harness();
    const w = await h.wallet(FUNDS);
    const model = chat(w.key).bindTools([weather]);
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
    const question = new HumanMessage('weather in Paris?');
    const first = await model.invoke([question]);
    const call = first.tool_calls![0]!;
    assert.deepEqual([call.name, call.args, call.id], ['get_weather', { city: 'Paris' }, 'call_fake1']);

    h.fake.behaviour = { usage: USAGE };
    const second = await model.invoke([question, first, await weather.invoke(call)]);
    assert.equal(textOf(second), CONTENT);
    const sent = h.fake.received[1]!.body.messages;
    assert.deepEqual(sent.at(-2).tool_calls, [{ id: 'call_fake1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
    assert.deepEqual(sent.at(-1), { role: 'tool', tool_call_id: 'call_fake1', content: '18°C and sunny in Paris' });
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * CHARGE);
  });
});

/** Both providers report the same bill: 100 prompt and 50 output tokens (Anthropic: 70 + 10 written + 20 read). */
const ANTHROPIC_USAGE = { input_tokens: 70, output_tokens: 50, cache_creation_input_tokens: 10, cache_read_input_tokens: 20 };
const OPENAI_USAGE = { prompt_tokens: 100, completion_tokens: 50 };
/** The ways a /v1/messages request reaches a provider, and what each bills (as in anthropic-sdk.test.ts). */
const UPSTREAMS = [
  // 90 × 1.2 + 10 cache writes × 1.5 + 50 × 2.4
  // Anthropic's message_start carries the input counts and a provisional output_tokens of 1, passed
  // through as they came; the translated one says 0 and 0 (the provider's usage comes at the end).
  { name: 'Anthropic upstream (native)', model: 'anth/claude-test', content: FAKE_ANTHROPIC_CONTENT, charge: 243, startOutputTokens: 1, startInputTokens: 100 },
  // 100 × 1.2 + 50 × 2.4
  { name: 'OpenAI-compatible upstream (translated)', model: 'fake/chat-small', content: CONTENT, charge: 240, startOutputTokens: 0, startInputTokens: 0 },
] as const;

describe('LangChain ChatAnthropic against /v1/messages', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  beforeEach(() => resetProviders(h, { usage: ANTHROPIC_USAGE }, { usage: OPENAI_USAGE }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  // anthropicApiUrl is the package's documented field (clientOptions.baseURL is read when it is unset).
  const chat = (key: string, model: string) => new ChatAnthropic({ model, apiKey: key, anthropicApiUrl: h.gw.url });
  const charged = async (account: any, charge: number) => {
    const b = await h.balance(account);
    assert.deepEqual({ balance: b.balance_usdc, locked: b.locked_usdc }, { balance: FUNDS - charge, locked: 0 });
  };

  for (const up of UPSTREAMS) {
    describe(up.name, () => {
      test('invoke: the answer with usage_metadata, billed exactly', async () => {
        const w = await h.wallet(FUNDS);
        const answer = await chat(w.key, up.model).invoke([new SystemMessage('Be brief.'), new HumanMessage('hi')]);
        assert.equal(textOf(answer), up.content);
        assert.equal(answer.response_metadata.stop_reason, 'end_turn');
        assert.equal(answer.usage_metadata?.output_tokens, 50);
        assert.equal(answer.usage_metadata?.input_tokens, 100, 'LangChain adds the cache terms into input_tokens');
        await charged(w.account, up.charge);
      });

      test('stream: the text in chunks, usage from message_start and message_delta, billed exactly', async () => {
        const w = await h.wallet(FUNDS);
        const { chunks, full } = await collect(await chat(w.key, up.model).stream('hi'));
        assert.ok(chunks.length > 2, `${chunks.length} chunks`);
        assert.equal(textOf(full), up.content);
        // A ChatAnthropic quirk, the same against Anthropic itself: it adds message_start's provisional
        // output_tokens to message_delta's final (cumulative) count, so its streamed usage_metadata
        // can be one token over. The bill is from message_delta's count: exactly 50.
        assert.equal(full.usage_metadata?.output_tokens, 50 + up.startOutputTokens);
        // ChatAnthropic takes input tokens from message_start alone; the gateway's translated stream says
        // input_tokens 0 there and the full usage in message_delta (docs/DECISIONS.md), so LangChain
        // reports 0 input tokens for a streamed translated model. The bill is the full 100.
        assert.equal(full.usage_metadata?.input_tokens, up.startInputTokens);
        await charged(w.account, up.charge);
      });

      test('bindTools: tool_use comes back as tool_calls, the tool_result goes back; each turn billed', async () => {
        const w = await h.wallet(FUNDS);
        h.anthropic.behaviour = { usage: ANTHROPIC_USAGE, toolCalls: [{ name: 'get_weather', input: { city: 'Paris' } }] };
        h.fake.behaviour = { usage: OPENAI_USAGE, toolCall: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
        const model = chat(w.key, up.model).bindTools([weather]);
        const question = new HumanMessage('weather in Paris?');
        const first = await model.invoke([question]);
        assert.equal(first.tool_calls?.length, 1);
        const call = first.tool_calls![0]!;
        assert.deepEqual([call.name, call.args], ['get_weather', { city: 'Paris' }]);
        assert.ok(call.id);

        h.anthropic.behaviour = { usage: ANTHROPIC_USAGE };
        h.fake.behaviour = { usage: OPENAI_USAGE };
        const second = await model.invoke([question, first, await weather.invoke(call)]);
        assert.equal(textOf(second), up.content);
        if (up.model.startsWith('anth/')) {
          const sent = h.anthropic.received.at(-1)!.body;
          assert.equal(sent.tools[0].name, 'get_weather');
          assert.deepEqual(stripSchemaNoise(sent.tools[0].input_schema), WEATHER_PARAMETERS);
          const last = sent.messages.at(-1);
          assert.equal(last.role, 'user');
          assert.deepEqual(
            last.content.map((b: any) => [b.type, b.tool_use_id, b.content]),
            [['tool_result', call.id, '18°C and sunny in Paris']],
          );
        } else {
          const sent = h.fake.received.at(-1)!.body;
          assert.deepEqual(sent.messages.at(-1), { role: 'tool', tool_call_id: call.id, content: '18°C and sunny in Paris' });
          assert.equal(sent.messages.at(-2).tool_calls[0].function.arguments, '{"city":"Paris"}');
        }
        await charged(w.account, 2 * up.charge);
      });
    });
  }
});

/** A JSON schema without the keys zod's converter adds ($schema, additionalProperties). */
function stripSchemaNoise(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _s, additionalProperties: _a, ...rest } = schema;
  return rest;
}
