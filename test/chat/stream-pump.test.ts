import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openAIChatInbound } from '../../src/protocols/openai-chat/inbound.ts';
import type { ChatPlan } from '../../src/metered/plan/plan.ts';
import { StreamPump } from '../../src/metered/stream-pump.ts';
import { openAIChatUpstream } from '../../src/protocols/openai-chat/upstream.ts';
import type { StreamDecoder, WireEvent } from '../../src/protocols/upstream.ts';

// The pump alone: provider bytes in, client bytes and usage out. No server, socket or database.

const PLAN = {
  upstreamBody: { model: 'm', messages: [{ role: 'user', content: 'Say hello' }] },
  parts: { tokens: 0, bytes: 0 },
  promptUpperBound: 1000,
  maxTokens: 100,
  n: 1,
  clientWantsUsage: false,
} as unknown as ChatPlan;

const bytes = (text: string) => new TextEncoder().encode(text);
const content = (text: string) => JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: text } }] });
const usageChunk = JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 12, completion_tokens: 3 } });
const sse = (...events: string[]) => events.map((e) => `data: ${e}\n\n`).join('');

function openAIPump(plan: ChatPlan = PLAN) {
  let contentChunks = 0;
  const pump = new StreamPump(openAIChatUpstream.streamDecoder(), openAIChatInbound.streamEncoder(plan), plan, () => contentChunks++);
  return { pump, contentChunks: () => contentChunks };
}

test('a complete stream: events pass through as sent, the usage the provider reported is the usage produced', async () => {
  const { pump, contentChunks } = openAIPump({ ...PLAN, clientWantsUsage: true });
  const body = sse(content('Hel'), content('lo'), usageChunk, '[DONE]');
  // The usage chunk waits for the settle (it goes out with the charge, at the end).
  assert.equal(pump.feed(bytes(body)), sse(content('Hel'), content('lo')));
  pump.ended();
  assert.equal(pump.error, null);
  assert.equal(pump.sawDone, true);
  assert.equal(contentChunks(), 2);
  const { input, output, estimated } = pump.usage!;
  assert.deepEqual({ promptTokens: input.total, completionTokens: output.total, estimated }, { promptTokens: 12, completionTokens: 3, estimated: false });
  assert.deepEqual(await pump.produced(), pump.usage);
  // Without a charge (a settle that did not apply), as the provider wrote it.
  assert.equal(pump.encoder.end(pump.usage!), sse(usageChunk) + 'data: [DONE]\n\n');
});

test('pieces split anywhere (inside an event, inside a UTF-8 character) give the same bytes', () => {
  const { pump } = openAIPump();
  const whole = bytes(sse(content('héllo ✓'), content('!')));
  let out = '';
  for (let i = 0; i < whole.length; i += 3) out += pump.feed(whole.subarray(i, i + 3));
  assert.equal(out, sse(content('héllo ✓'), content('!')));
});

test('a usage chunk the client did not ask for is not sent, but its usage is kept', () => {
  const { pump, contentChunks } = openAIPump();
  assert.equal(pump.feed(bytes(sse(content('Hi'), usageChunk))), sse(content('Hi')));
  assert.equal(pump.usage?.input.total, 12);
  assert.equal(contentChunks(), 1, 'the usage chunk is not content');
});

test("a provider's error event: the content before it is sent, the error is redacted, the end does not overwrite it", () => {
  const { pump } = openAIPump();
  const error = JSON.stringify({ error: { message: 'quota exceeded for key sk-abcdef123456' } });
  assert.equal(pump.feed(bytes(sse(content('Hi'), error))), sse(content('Hi')));
  assert.equal(pump.error, 'the provider reported an error: quota exceeded for key [redacted]');
  pump.ended();
  assert.equal(pump.error, 'the provider reported an error: quota exceeded for key [redacted]');
  assert.match(pump.encoder.failure(`${pump.error}; nothing was charged`), /"type":"upstream_error"[\s\S]*data: \[DONE\]/);
});

test('an error event without a message says only that the provider reported an error', () => {
  const { pump } = openAIPump();
  pump.feed(bytes(sse(JSON.stringify({ error: { code: 500 } }))));
  assert.equal(pump.error, 'the provider reported an error');
});

test('no usage and no end marker: the stream ended early, and what was produced is counted (estimated)', async () => {
  const { pump } = openAIPump();
  pump.feed(bytes(sse(content('Hello there, how are you today?'))));
  pump.ended();
  assert.equal(pump.error, 'the provider ended the stream early');
  assert.equal(pump.usage, null);
  const produced = await pump.produced();
  assert.equal(produced.estimated, true);
  assert.ok(produced.output.total > 0 && produced.output.total <= PLAN.maxTokens, `completion tokens ${produced.output.total}`);
  assert.ok(produced.input.total > 0 && produced.input.total <= PLAN.promptUpperBound, `prompt tokens ${produced.input.total}`);
});

test('the end marker without usage is complete: nothing failed, the usage is estimated', async () => {
  const { pump } = openAIPump();
  pump.feed(bytes(sse(content('Hi'), '[DONE]')));
  pump.ended();
  assert.equal(pump.error, null);
  assert.equal((await pump.produced()).estimated, true);
});

test('nothing produced at all: no completion tokens', async () => {
  const { pump } = openAIPump();
  assert.equal(pump.feed(bytes(': keep-alive\n\n')), '');
  assert.equal((await pump.produced()).output.total, 0);
});

/** A decoder that hands provider events through natively and reported the prompt side early. */
function nativeDecoder(): StreamDecoder {
  return {
    decode(data): WireEvent[] {
      return [
        { kind: 'native', event: `event: x\ndata: ${data}\n\n` },
        { kind: 'chunk', data: content(data) },
      ];
    },
    promptUsage: () => ({ input: { total: 7, cacheRead: 0, cacheWrite: 0 }, output: { total: 0, reasoning: 0 }, estimated: false }),
  };
}

test('native events are encoded by the native encoder, and the prompt side the provider reported early is billed exactly', async () => {
  const encoder = { chunk: () => '', native: (event: string) => event.toUpperCase(), failure: () => '', end: () => '' };
  const pump = new StreamPump(nativeDecoder(), encoder, PLAN);
  assert.equal(pump.feed(bytes('data: hi\n\n')), 'EVENT: X\nDATA: HI\n\n');
  const produced = await pump.produced();
  assert.equal(produced.input.total, 7, 'the prompt side as reported');
  assert.equal(produced.estimated, true);
  assert.ok(produced.output.total > 0);
});

/*
 * attack: the pump's end and usage: the newest usage wins, and only `[DONE]`, a usage-only chunk or a finish beside a
 * usage ends a stream (a usage on a content chunk, as vLLM sends on every one, is no end); text on usage chunks counts.
 */
const endPump = () => openAIPump({ ...PLAN, maxTokens: 1000 } as ChatPlan).pump;
const chunk = (text: string, usage?: unknown) =>
  JSON.stringify({
    id: 'c',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta: { content: text }, finish_reason: null }],
    ...(usage === undefined ? {} : { usage }),
  });
const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i} `);

test('attack: an unusable usage on an early chunk (prompt counted only), then the body ends with no [DONE] and no final usage: the stream ended early', () => {
  const p = endPump();
  // Several OpenAI-compatible servers put the prompt count on early chunks; this one leaves completion_tokens out.
  p.feed(bytes(sse(chunk('Hello ', { prompt_tokens: 100 }), ...words(20).map((w) => chunk(w)))));
  p.ended(); // the provider's body ended cleanly, cut short: no finish_reason, no [DONE], no final usage
  assert.equal(p.error, 'the provider ended the stream early', 'a cut stream is billed as complete and the client told it ended normally');
});

test('an early usable usage {100, 0} (as some servers send) then a clean cut: the stream ended early', () => {
  const p = endPump();
  p.feed(bytes(sse(chunk('Hello ', { prompt_tokens: 100, completion_tokens: 0, total_tokens: 100 }), ...words(20).map((w) => chunk(w)))));
  p.ended();
  assert.equal(p.error, 'the provider ended the stream early');
});

test('vLLM-style continuous usage on every chunk, then a clean cut: the stream ended early', () => {
  const p = endPump();
  p.feed(bytes(sse(...words(20).map((w, i) => chunk(w, { prompt_tokens: 100, completion_tokens: i + 1, total_tokens: 101 + i })))));
  p.ended();
  assert.equal(p.error, 'the provider ended the stream early');
});

test('a proxy with counting off that puts {100, 0} on every chunk: the delivered text is estimated, not billed as 0 output', async () => {
  const p = endPump();
  const zero = { prompt_tokens: 100, completion_tokens: 0, total_tokens: 100 };
  p.feed(
    bytes(sse(...words(200).map((w) => chunk(w, zero)), JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [], usage: zero }), '[DONE]')),
  );
  p.ended();
  assert.equal(p.error, null);
  const u = await p.produced();
  assert.ok(u.output.total > 100, `200 words delivered, billed ${u.output.total} output tokens (estimated: ${u.estimated})`);
});

test('an event that is not JSON is the stream failing; an empty event is a keep-alive and a [DONE] with blanks still the end', () => {
  const broken = openAIPump();
  assert.equal(broken.pump.feed(bytes(sse(content('Hi'), '{"id":"c","obj', content('!')))).startsWith(sse(content('Hi'))), true);
  assert.equal(broken.pump.error, 'the provider sent an event that is not JSON');

  const { pump } = openAIPump();
  assert.equal(pump.feed(bytes(`data:\n\n${sse(content('Hi'), usageChunk)}data: [DONE] \n\n`)), sse(content('Hi')));
  pump.ended();
  assert.equal(pump.error, null);
  assert.equal(pump.sawDone, true);
});
