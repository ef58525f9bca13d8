import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { generateText, streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatAnthropic } from '@langchain/anthropic';
import { ChatOpenAI } from '@langchain/openai';
import { concat } from '@langchain/core/utils/stream';
import type { AIMessageChunk } from '@langchain/core/messages';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';

/**
 * Where each real client, with its defaults, exposes the charge the gateway writes into the final
 * usage (`cost` in USD, `charged_usdc` exact): the places docs/api.md ("The charge in the answer")
 * names, and the places where a client drops it. Every request bills 100 prompt and 50 output
 * tokens; the charge must be the wallet's balance change.
 */
const FUNDS = 1_000_000;
const OPENAI_USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const ANTHROPIC_USAGE = { input_tokens: 100, output_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4 micro-USDC
const COST = 0.00024;

describe('each client exposes the charge where docs/api.md says', () => {
  let h: AnthropicHarness;
  let w: { account: any; key: string };
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  beforeEach(async () => {
    resetProviders(h, { usage: ANTHROPIC_USAGE }, { usage: OPENAI_USAGE });
    w = await h.wallet(FUNDS);
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  /** The wallet paid exactly `requests` charges. */
  const paid = async (requests = 1) => assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - requests * CHARGE);
  const openai = () => new OpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: w.key });

  test('openai-node, chat completions: reply.usage, and the last chunk of a stream that asked for usage', async () => {
    const reply = await openai().chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    const usage = reply.usage as OpenAI.CompletionUsage & { cost?: number; charged_usdc?: number };
    assert.deepEqual([usage.cost, usage.charged_usdc], [COST, CHARGE]);
    const stream = await openai().chat.completions.create({
      model: 'fake/chat-small',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let last: any;
    for await (const chunk of stream) if (chunk.usage) last = chunk.usage;
    assert.deepEqual([last.cost, last.charged_usdc], [COST, CHARGE]);
    // Without stream_options.include_usage the stream has no usage chunk, so no charge (OpenAI's opt-in).
    const plain = await openai().chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true });
    let seen = false;
    for await (const chunk of plain) seen ||= Boolean(chunk.usage);
    assert.equal(seen, false);
    await paid(3);
  });

  test('openai-node, Responses: response.usage, JSON and in responses.stream().finalResponse()', async () => {
    const response = await openai().responses.create({ model: 'fake/chat-small', input: 'hi', store: false });
    assert.deepEqual([(response.usage as any).cost, (response.usage as any).charged_usdc], [COST, CHARGE]);
    const final = await openai().responses.stream({ model: 'fake/chat-small', input: 'hi', store: false }).finalResponse();
    assert.deepEqual([(final.usage as any).cost, (final.usage as any).charged_usdc], [COST, CHARGE]);
    await paid(2);
  });

  test('openai-node, Responses: a stored Response keeps its charge (responses.retrieve)', async () => {
    const response = await openai().responses.create({ model: 'fake/chat-small', input: 'hi' });
    const stored = await openai().responses.retrieve(response.id);
    assert.equal((stored.usage as any).charged_usdc, CHARGE);
    await paid(1);
  });

  for (const model of ['anth/claude-test', 'fake/chat-small']) {
    test(`@anthropic-ai/sdk (${model}): message.usage; in a stream, the message_delta event's usage (finalMessage() drops it)`, async () => {
      const sdk = new Anthropic({ baseURL: h.gw.url, apiKey: w.key });
      const msg = await sdk.messages.create({ model, max_tokens: 300, messages: [{ role: 'user', content: 'hi' }] });
      assert.deepEqual([(msg.usage as any).cost, (msg.usage as any).charged_usdc], [COST, CHARGE]);
      const stream = sdk.messages.stream({ model, max_tokens: 300, messages: [{ role: 'user', content: 'hi' }] });
      let delta: any;
      stream.on('streamEvent', (event) => {
        if (event.type === 'message_delta') delta = event.usage;
      });
      const final = await stream.finalMessage();
      assert.deepEqual([delta.cost, delta.charged_usdc], [COST, CHARGE]);
      assert.equal((final.usage as any).cost, undefined, 'the SDK copies only the token counts into its snapshot');
      await paid(2);
    });
  }

  test('AI SDK, @ai-sdk/openai-compatible: result.usage.raw (a stream has it only with includeUsage: true)', async () => {
    const base = { name: 'tollgate', baseURL: `${h.gw.url}/v1`, apiKey: w.key };
    const generated = await generateText({ model: createOpenAICompatible(base)('fake/chat-small'), prompt: 'hi' });
    assert.deepEqual([(generated.usage.raw as any)?.cost, (generated.usage.raw as any)?.charged_usdc], [COST, CHARGE]);
    const streamed = streamText({ model: createOpenAICompatible({ ...base, includeUsage: true })('fake/chat-small'), prompt: 'hi' });
    for await (const _ of streamed.textStream);
    assert.equal(((await streamed.usage).raw as any)?.charged_usdc, CHARGE);
    // Its default does not ask for the usage chunk: the stream carries no usage and no charge.
    const plain = streamText({ model: createOpenAICompatible(base)('fake/chat-small'), prompt: 'hi' });
    for await (const _ of plain.textStream);
    assert.equal((await plain.usage).raw, undefined);
    await paid(3);
  });

  test('AI SDK, @ai-sdk/openai (Responses, its default): result.usage.raw, JSON and streamed', async () => {
    const model = createOpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: w.key })('fake/chat-small');
    const generated = await generateText({ model, prompt: 'hi' });
    assert.deepEqual([(generated.usage.raw as any)?.cost, (generated.usage.raw as any)?.charged_usdc], [COST, CHARGE]);
    const streamed = streamText({ model, prompt: 'hi' });
    for await (const _ of streamed.textStream);
    assert.equal(((await streamed.usage).raw as any)?.charged_usdc, CHARGE);
    await paid(2);
  });

  test('AI SDK, @ai-sdk/openai .chat(): its usage schema drops unknown fields; the response body has it when asked for', async () => {
    const model = createOpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: w.key }).chat('fake/chat-small');
    const generated = await generateText({ model, prompt: 'hi' });
    assert.equal((generated.usage.raw as any)?.charged_usdc, undefined);
    const withBody = await generateText({ model, prompt: 'hi', include: { responseBody: true } } as Parameters<typeof generateText>[0]);
    assert.equal((withBody.response.body as any).usage.charged_usdc, CHARGE);
    await paid(2);
  });

  test('LangChain ChatOpenAI: response_metadata.usage, invoke and stream (its default asks for usage)', async () => {
    const chat = new ChatOpenAI({ model: 'fake/chat-small', apiKey: w.key, configuration: { baseURL: `${h.gw.url}/v1` } });
    const answer = await chat.invoke('hi');
    assert.deepEqual([(answer.response_metadata as any).usage?.cost, (answer.response_metadata as any).usage?.charged_usdc], [COST, CHARGE]);
    let full: AIMessageChunk | undefined;
    for await (const chunk of await chat.stream('hi')) full = full ? concat(full, chunk) : chunk;
    assert.equal((full!.response_metadata as any).usage?.charged_usdc, CHARGE);
    await paid(2);
  });

  for (const model of ['anth/claude-test', 'fake/chat-small']) {
    test(`LangChain ChatAnthropic (${model}): response_metadata.usage.cost, invoke and stream (it reads message_delta's cost)`, async () => {
      const chat = new ChatAnthropic({ model, apiKey: w.key, anthropicApiUrl: h.gw.url });
      const answer = await chat.invoke('hi');
      assert.deepEqual([(answer.response_metadata as any).usage?.cost, (answer.response_metadata as any).usage?.charged_usdc], [COST, CHARGE]);
      let full: AIMessageChunk | undefined;
      for await (const chunk of await chat.stream('hi')) full = full ? concat(full, chunk) : chunk;
      // Of the stream it keeps `cost` alone (OpenRouter's name).
      assert.equal((full!.response_metadata as any).usage?.cost, COST);
      await paid(2);
    });
  }
});
