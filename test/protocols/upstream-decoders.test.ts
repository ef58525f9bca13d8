import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { createParser } from 'eventsource-parser';
import { anthropicUpstream } from '../../src/protocols/anthropic-messages/upstream.ts';
import { anthropicNativeUpstream } from '../../src/protocols/anthropic-messages/native-upstream.ts';
import { openAIChatUpstream } from '../../src/protocols/openai-chat/upstream.ts';
import { readUsage } from '../../src/protocols/openai-chat/decode-usage.ts';
import type { Usage } from '../../src/protocols/internal.ts';
import type { StreamDecoder, UpstreamTranslator, WireEvent } from '../../src/protocols/upstream.ts';

/**
 * The upstream translators' decoders on recorded provider streams and answers (fixtures/): what
 * the chat pipeline gets from them, the internal chunks and the neutral usage, with no gateway.
 */

const fixture = (name: string) => readFileSync(new URL(`fixtures/${name}`, import.meta.url), 'utf8');

/** Every event a decoder makes of a recorded SSE body; `cut`: only the first that many events reach it. */
function decodeAll(decoder: StreamDecoder, sse: string, cut = Infinity): WireEvent[] {
  const events: WireEvent[] = [];
  let seen = 0;
  const parser = createParser({
    onEvent: (e) => {
      if (seen++ < cut) events.push(...decoder.decode(e.data));
    },
  });
  parser.feed(sse);
  return events;
}

/** The text of the content chunks, in order. */
const contentOf = (events: WireEvent[]) =>
  events
    .filter((e) => e.kind === 'chunk')
    .map((e) => JSON.parse(e.data).choices?.[0]?.delta?.content ?? '')
    .join('');

const usageEvents = (events: WireEvent[]) => events.filter((e): e is Extract<WireEvent, { kind: 'usage' }> => e.kind === 'usage');

const usage = (input: Usage['input'], output: Usage['output']): Usage => ({ input, output, estimated: false });

describe('OpenAI-compatible upstream: a recorded stream', () => {
  const events = decodeAll(openAIChatUpstream.streamDecoder(), fixture('openai-stream.sse'));

  test('content chunks pass through as sent (text that merely mentions "usage" is content), then the usage chunk, then done', () => {
    assert.deepEqual(
      events.map((e) => e.kind),
      ['chunk', 'chunk', 'chunk', 'chunk', 'usage', 'done'],
    );
    assert.equal(contentOf(events), 'Hello, "usage": {world}.');
  });

  test('the usage chunk (spaced as Python writes it) is read into neutral usage, and is usage-only', () => {
    const [u] = usageEvents(events);
    assert.equal(u!.usageOnly, true);
    assert.deepEqual(u!.usage, usage({ total: 2006, cacheRead: 1920, cacheWrite: 0 }, { total: 300, reasoning: 256 }));
  });

  test('no prompt side before the end', () => {
    assert.equal(openAIChatUpstream.streamDecoder().promptUsage(), null);
  });

  test("an error event is the provider's error, not content", () => {
    assert.deepEqual(openAIChatUpstream.streamDecoder().decode('{"error":{"message":"overloaded"}}'), [{ kind: 'error', providerMessage: 'overloaded' }]);
  });
});

describe('Anthropic upstream: a recorded stream', () => {
  const sse = fixture('anthropic-stream.sse');

  for (const [name, translator] of [
    ['translated', anthropicUpstream],
    ['native', anthropicNativeUpstream],
  ] as [string, UpstreamTranslator][]) {
    test(`${name}: the text, one usage event at message_stop with all three input terms, then done`, () => {
      const events = decodeAll(translator.streamDecoder(), sse);
      assert.equal(contentOf(events), 'Hello, world.');
      const usages = usageEvents(events);
      assert.equal(usages.length, 1);
      assert.equal(usages[0]!.usageOnly, true);
      assert.deepEqual(usages[0]!.usage, {
        ...usage({ total: 2012, cacheRead: 1600, cacheWrite: 400 }, { total: 9, reasoning: 0 }),
        input: { total: 2012, cacheRead: 1600, cacheWrite: 400, cacheReadPrice: 'cacheRead' },
      });
      assert.equal(events.at(-1)!.kind, 'done');
    });
  }

  test('native: every event but message_stop is relayed as the provider wrote it', () => {
    const events = decodeAll(anthropicNativeUpstream.streamDecoder(), sse);
    const relayed = events.filter((e) => e.kind === 'native').map((e) => e.event.split('\n')[0]);
    assert.deepEqual(relayed, [
      'event: message_start',
      'event: content_block_start',
      'event: ping',
      'event: content_block_delta',
      'event: content_block_delta',
      'event: content_block_stop',
      'event: message_delta',
    ]);
  });

  test('a stream cut after message_start has its prompt side, exactly, and no usage event', () => {
    const decoder = anthropicUpstream.streamDecoder();
    const events = decodeAll(decoder, sse, 4);
    assert.deepEqual(usageEvents(events), []);
    assert.deepEqual(decoder.promptUsage()?.input, { total: 2012, cacheRead: 1600, cacheWrite: 400, cacheReadPrice: 'cacheRead' });
  });
});

describe('JSON answers: the internal completion and its neutral usage', () => {
  test('OpenAI: the answer is passed on untouched, its usage read', () => {
    const text =
      '{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2}}';
    const answer = openAIChatUpstream.decodeAnswer(text);
    assert.ok(answer.ok);
    assert.equal(answer.text, text);
    assert.deepEqual(answer.usage, usage({ total: 10, cacheRead: 0, cacheWrite: 0 }, { total: 2, reasoning: 0 }));
  });

  test('OpenAI: no usage reported is null (the gateway estimates)', () => {
    const answer = openAIChatUpstream.decodeAnswer('{"choices":[]}');
    assert.ok(answer.ok);
    assert.equal(answer.usage, null);
  });

  test('Anthropic: usage without output_tokens is null, not zero', () => {
    const answer = anthropicUpstream.decodeAnswer(
      '{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3}}',
    );
    assert.ok(answer.ok);
    assert.equal(answer.usage, null);
    assert.equal(answer.parsed.choices[0]?.message?.content, 'hi');
  });

  test("malformed answers: not the protocol's answer is a problem; text that is not JSON throws, as before", () => {
    assert.deepEqual(openAIChatUpstream.decodeAnswer('{"choices":{}}'), { ok: false, problem: 'the provider sent a response that is not a chat completion' });
    assert.deepEqual(openAIChatUpstream.decodeAnswer('[1]'), { ok: false, problem: 'the provider sent a response that is not a chat completion' });
    assert.deepEqual(anthropicUpstream.decodeAnswer('{"type":"message","content":"hi"}'), {
      ok: false,
      problem: 'the provider sent a response that is not an Anthropic message',
    });
    assert.deepEqual(anthropicUpstream.decodeAnswer('null'), { ok: false, problem: 'the provider sent a response that is not an Anthropic message' });
    assert.throws(() => openAIChatUpstream.decodeAnswer('<html>'), SyntaxError);
    assert.throws(() => anthropicUpstream.decodeAnswer('<html>'), SyntaxError);
  });
});

describe('readUsage: OpenAI usage objects, leniently', () => {
  test('a usage lacking either main count, or with one negative, is none (the gateway estimates); fractions are floored, odd details read as zero', () => {
    assert.equal(readUsage(null), null);
    assert.equal(readUsage([]), null);
    assert.equal(readUsage({ total_tokens: 5 }), null);
    // One count missing, null, not a number or negative: read as zero, it settled a delivered answer for its prompt alone.
    assert.equal(readUsage({ prompt_tokens: 10 }), null);
    assert.equal(readUsage({ prompt_tokens: 10, completion_tokens: null }), null);
    assert.equal(readUsage({ prompt_tokens: 10, completion_tokens: '400' }), null);
    assert.equal(readUsage({ completion_tokens: 400 }), null);
    assert.equal(readUsage({ prompt_tokens: 10.7, completion_tokens: -3 }), null);
    assert.deepEqual(
      readUsage({ prompt_tokens: 10.7, completion_tokens: 3.9, prompt_tokens_details: 'x', completion_tokens_details: { reasoning_tokens: -1 } }),
      usage({ total: 10, cacheRead: 0, cacheWrite: 0 }, { total: 3, reasoning: 0 }),
    );
  });

  test("cache fields in Anthropic's names (a proxy in front of Claude) are the reads and writes, at the cache-read price", () => {
    assert.deepEqual(
      readUsage({
        prompt_tokens: 100,
        completion_tokens: 1,
        prompt_tokens_details: { cached_tokens: 60 },
        cache_read_input_tokens: 60,
        cache_creation_input_tokens: 30,
      })!.input,
      { total: 100, cacheRead: 60, cacheWrite: 30, cacheReadPrice: 'cacheRead' },
    );
  });
});
