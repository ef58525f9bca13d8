import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openAIChatInbound } from '../../src/protocols/openai-chat/inbound.ts';
import type { ChatPlan } from '../../src/metered/plan/plan.ts';
import { StreamPump } from '../../src/metered/stream-pump.ts';
import { openAIChatUpstream } from '../../src/protocols/openai-chat/upstream.ts';

// attack: the pump's "ended early" and usage reading: the newest usage wins, and only an end marker, a usage-only chunk
// or a finish beside a usage ends a stream (a usage on a content chunk, as vLLM sends on every one, is no end).

const PLAN = {
  upstreamBody: { model: 'm', messages: [{ role: 'user', content: 'Say hello' }] },
  parts: { tokens: 0, bytes: 0 },
  promptUpperBound: 1000,
  maxTokens: 1000,
  n: 1,
  clientWantsUsage: true,
} as unknown as ChatPlan;

const bytes = (text: string) => new TextEncoder().encode(text);
const chunk = (text: string, usage?: unknown) =>
  JSON.stringify({
    id: 'c',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta: { content: text }, finish_reason: null }],
    ...(usage === undefined ? {} : { usage }),
  });
const sse = (...events: string[]) => events.map((e) => `data: ${e}\n\n`).join('');
const pump = () => new StreamPump(openAIChatUpstream.streamDecoder(), openAIChatInbound.streamEncoder(PLAN), PLAN);
const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i} `);

test('regression: an unusable usage on an early chunk (prompt counted only), then the body ends with no [DONE] and no final usage: the stream ended early', () => {
  const p = pump();
  // Several OpenAI-compatible servers put the prompt count on early chunks; this one leaves completion_tokens out.
  p.feed(bytes(sse(chunk('Hello ', { prompt_tokens: 100 }), ...words(20).map((w) => chunk(w)))));
  p.ended(); // the provider's body ended cleanly, cut short: no finish_reason, no [DONE], no final usage
  assert.equal(p.error, 'the provider ended the stream early', 'a cut stream is billed as complete and the client told it ended normally');
});

test('an early usable usage {100, 0} (as some servers send) then a clean cut: the stream ended early', () => {
  const p = pump();
  p.feed(bytes(sse(chunk('Hello ', { prompt_tokens: 100, completion_tokens: 0, total_tokens: 100 }), ...words(20).map((w) => chunk(w)))));
  p.ended();
  assert.equal(p.error, 'the provider ended the stream early');
});

test('vLLM-style continuous usage on every chunk, then a clean cut: the stream ended early', () => {
  const p = pump();
  p.feed(bytes(sse(...words(20).map((w, i) => chunk(w, { prompt_tokens: 100, completion_tokens: i + 1, total_tokens: 101 + i })))));
  p.ended();
  assert.equal(p.error, 'the provider ended the stream early');
});

test('a proxy with counting off that puts {100, 0} on every chunk: the delivered text is estimated, not billed as 0 output', async () => {
  const p = pump();
  const zero = { prompt_tokens: 100, completion_tokens: 0, total_tokens: 100 };
  p.feed(
    bytes(sse(...words(200).map((w) => chunk(w, zero)), JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [], usage: zero }), '[DONE]')),
  );
  p.ended();
  assert.equal(p.error, null);
  const u = await p.produced();
  assert.ok(u.output.total > 100, `200 words delivered, billed ${u.output.total} output tokens (estimated: ${u.estimated})`);
});
