import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { chargeFields, chargeOf, mayNameACharge, spliceCharge, withCharge } from '../../src/protocols/charge.ts';
import { anthropicMessagesInbound } from '../../src/protocols/anthropic-messages/inbound.ts';
import type { EncodePlan } from '../../src/protocols/inbound.ts';
import type { Usage } from '../../src/protocols/internal.ts';
import { openAIChatInbound } from '../../src/protocols/openai-chat/inbound.ts';
import { responsesInbound } from '../../src/protocols/openai-responses/inbound.ts';

/** The charge fields (src/protocols/charge.ts) and what each protocol's final usage claims with and without a charge. */

const plan = (native = false): EncodePlan => ({ model: { upstreamName: 'm' }, clientWantsUsage: true, native });
const USAGE: Usage = { input: { total: 10, cacheRead: 0, cacheWrite: 0 }, output: { total: 5, reasoning: 0 }, estimated: false };
/** A provider that names a charge of its own in its usage (OpenRouter's `cost` is what the operator pays). */
const PROVIDER_CLAIM = { cost: 0.5, charged_usdc: 1, charge_deferred: true, cost_details: { upstream_inference_cost: 0.5 } };

const sseData = (text: string) =>
  text.split('\n\n').flatMap((b) =>
    b
      .split('\n')
      .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
      .map((l) => JSON.parse(l.slice(6))),
  );

describe('the charge fields', () => {
  test('a settle that was not applied claims no charge; a deferred one says so', () => {
    assert.equal(chargeOf({ applied: false, chargedUsdc: 0 }), undefined);
    assert.deepEqual(chargeOf({ applied: true, chargedUsdc: 7 }), { usdc: 7, deferred: false });
    assert.deepEqual(chargeFields({ usdc: 7, deferred: true }), { cost: 0.000007, charged_usdc: 7, charge_deferred: true });
    assert.deepEqual(chargeFields(undefined), {});
  });

  test('cost is the exact decimal of the micro-USDC amount in JSON', () => {
    for (const [usdc, text] of [
      [1, '0.000001'],
      [999_999, '0.999999'],
      [123_456_789, '123.456789'],
      [0, '0'],
      [4_503_599_627_370_495, '4503599627.370495'],
    ] as const) {
      assert.equal(JSON.stringify(chargeFields({ usdc, deferred: false }).cost), text);
    }
  });

  test("the provider's own charge fields are removed, with or without a charge of ours", () => {
    assert.deepEqual(withCharge({ prompt_tokens: 1, ...PROVIDER_CLAIM }, undefined), { prompt_tokens: 1 });
    assert.deepEqual(withCharge({ prompt_tokens: 1, ...PROVIDER_CLAIM }, { usdc: 3, deferred: false }), { prompt_tokens: 1, cost: 0.000003, charged_usdc: 3 });
  });
});

describe('the charge spliced into a JSON answer as text', () => {
  const charge = { usdc: 25, deferred: false };
  test('into the one usage object, whatever its spacing, empty or not; the rest byte for byte', () => {
    const spaced = '{"id": "x", "choices": [{"message": {"content": "a \\"usage\\": {} b"}}],\n "usage" : { "prompt_tokens": 3 }}';
    const out = spliceCharge(spaced, charge)!;
    assert.equal(
      out,
      '{"id": "x", "choices": [{"message": {"content": "a \\"usage\\": {} b"}}],\n "usage" : {"cost":0.000025,"charged_usdc":25, "prompt_tokens": 3 }}',
    );
    assert.deepEqual(JSON.parse(out).usage, { cost: 0.000025, charged_usdc: 25, prompt_tokens: 3 });
    assert.deepEqual(JSON.parse(spliceCharge('{"usage":{ }}', charge)!), { usage: { cost: 0.000025, charged_usdc: 25 } });
  });

  test('not when it cannot be sure: a charge name already there (it must be removed), two usage keys, a usage that is no object', () => {
    assert.equal(spliceCharge('{"usage":{"prompt_tokens":1,"cost":0.5}}', charge), null);
    assert.equal(spliceCharge('{"x":{"usage":{}},"usage":{"prompt_tokens":1}}', charge), null);
    assert.equal(spliceCharge('{"content":"usage","usage":{"prompt_tokens":1}}', charge), null);
    assert.equal(spliceCharge('{"usage":null}', charge), null);
    // A JSON escape can spell any name (a charge's, or usage's own): the text cannot be trusted then.
    assert.equal(spliceCharge('{"usage":{"prompt_tokens":1,"\\u0063ost":0.5}}', charge), null);
    assert.equal(spliceCharge('{"usage":{"prompt_tokens":1},"\\u0075sage":{"prompt_tokens":9}}', charge), null);
    assert.equal(mayNameACharge('{"choices":[{"delta":{"content":"caf\\u00e9"}}]}'), true);
    assert.equal(mayNameACharge('{"choices":[{"delta":{"content":"café"}}]}'), false);
    // The callers then write the answer again, the provider's claim removed.
    const answer = '{"id":"x","usage":{"prompt_tokens":1,"cost":0.5}}';
    assert.deepEqual(JSON.parse(openAIChatInbound.encodeAnswer(answer, JSON.parse(answer), plan(), USAGE, charge)).usage, {
      prompt_tokens: 1,
      cost: 0.000025,
      charged_usdc: 25,
    });
  });
});

describe('attack: a stream whose settle was not applied claims no charge, whatever the provider wrote', () => {
  test('chat completions: the usage chunk goes out without a charge', () => {
    const e = openAIChatInbound.streamEncoder(plan());
    e.chunk(JSON.stringify({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, ...PROVIDER_CLAIM } }), true);
    const [chunk] = sseData(e.end(USAGE, undefined, undefined));
    assert.deepEqual(chunk.usage, { prompt_tokens: 10, completion_tokens: 5 });
  });

  test("chat completions: a content chunk that carries usage with a charge of the provider's loses it; plain content passes byte for byte", () => {
    const e = openAIChatInbound.streamEncoder(plan());
    const [chunk] = sseData(e.chunk(JSON.stringify({ choices: [{ delta: { content: 'hi' } }], usage: { prompt_tokens: 1, ...PROVIDER_CLAIM } }), false));
    assert.deepEqual(chunk.usage, { prompt_tokens: 1 });
    const spaced = '{"choices": [{"delta": {"content": "the \\"cost\\" of it"}}]}';
    assert.equal(e.chunk(spaced, false), `data: ${spaced}\n\n`);
  });

  test('Messages, native: message_delta is held for the settle and goes out without a charge', () => {
    const e = anthropicMessagesInbound.streamEncoder(plan(true));
    const delta = { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5, ...PROVIDER_CLAIM } };
    assert.equal(e.native!(`event: message_delta\ndata: ${JSON.stringify(delta)}\n\n`), '');
    const out = e.end(USAGE, undefined, undefined);
    assert.match(out, /^event: message_delta\n/);
    assert.deepEqual(sseData(out)[0].usage, { output_tokens: 5 });
    assert.match(out, /event: message_stop\n/);
  });

  test('Messages, native: a message_start whose usage names a charge loses it; other events pass as sent', () => {
    const e = anthropicMessagesInbound.streamEncoder(plan(true));
    const start = { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 10, output_tokens: 1, ...PROVIDER_CLAIM } } };
    assert.deepEqual(sseData(e.native!(`event: message_start\ndata: ${JSON.stringify(start)}\n\n`))[0].message.usage, { input_tokens: 10, output_tokens: 1 });
    const plain = `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 10 } } })}\n\n`;
    assert.equal(e.native!(plain), plain);
  });

  test('Messages, translated, and Responses: the billed usage without a charge', () => {
    const messages = sseData(anthropicMessagesInbound.streamEncoder(plan()).end(USAGE, undefined, undefined)).find((e) => e.type === 'message_delta');
    assert.equal(messages.usage.charged_usdc, undefined);
    const responses = responsesInbound.streamEncoder(plan());
    responses.chunk(JSON.stringify({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, ...PROVIDER_CLAIM } }), true);
    const completed = sseData(responses.end(USAGE, undefined, undefined)).find((e) => e.type === 'response.completed');
    assert.equal(completed.response.usage.charged_usdc, undefined);
    assert.equal(completed.response.usage.cost, undefined);
  });

  test('with a deferred charge, each final usage says so', () => {
    const charge = { usdc: 40, deferred: true };
    const chat = openAIChatInbound.streamEncoder(plan());
    chat.chunk('{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}', true);
    assert.equal(sseData(chat.end(USAGE, undefined, charge))[0].usage.charge_deferred, true);
    const native = anthropicMessagesInbound.streamEncoder(plan(true));
    native.native!('event: message_delta\ndata: {"type":"message_delta","delta":{},"usage":{"output_tokens":5}}\n\n');
    assert.equal(sseData(native.end(USAGE, undefined, charge))[0].usage.charge_deferred, true);
    const responses = sseData(responsesInbound.streamEncoder(plan()).end(USAGE, undefined, charge)).find((e) => e.type === 'response.completed');
    // No usage chunk reached this encoder: the billed usage carries the charge.
    assert.deepEqual(responses.response.usage, {
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 15,
      cost: 0.00004,
      charged_usdc: 40,
      charge_deferred: true,
    });
  });

  test('a native JSON answer gains the charge in its own usage; without a usage object it is left as sent', () => {
    const answer = JSON.stringify({ id: 'msg_1', type: 'message', usage: { input_tokens: 10, output_tokens: 5, ...PROVIDER_CLAIM } });
    const encoded = JSON.parse(anthropicMessagesInbound.encodeAnswer(answer, {} as never, plan(true), USAGE, { usdc: 9, deferred: false }));
    assert.deepEqual(encoded.usage, { input_tokens: 10, output_tokens: 5, cost: 0.000009, charged_usdc: 9 });
    const bare = '{"id":"msg_1"}';
    assert.equal(anthropicMessagesInbound.encodeAnswer(bare, {} as never, plan(true), USAGE, { usdc: 9, deferred: false }), bare);
  });
});
