import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { readSse, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { expectNothingCharged, usageRowsOf } from '../support/usage-rows.ts';
import { until } from '../support/until.ts';

/*
 * A provider that fails after its 200 reports the failure in band. OpenAI, vLLM's current servers
 * and SGLang send `data: {"error": {...}}` alone, which the gateway turns into the spec's error
 * event (4.7 rule 4), nothing charged. Other OpenAI-compatible upstreams word the same failure as a
 * chunk that also carries `choices`, and then end the stream with `data: [DONE]`:
 * - OpenRouter: a chat.completion.chunk with a top-level `error` and `choices[0].finish_reason: "error"`;
 * - aggregators relaying a provider's capacity error: a chunk with `choices: []` beside `error`;
 * - vLLM releases whose streaming error is the flat ErrorResponse `{"object": "error", "message", …}`.
 * The defect: each of these was relayed as an ordinary content chunk, the [DONE] after it made the
 * stream complete, and the cut answer was billed (from the estimate) as if it had been delivered,
 * with no error event for the client: the spec's "provider fails mid-stream: lock released, error
 * sent as an SSE data event" did not hold.
 */
const FUNDS = 1_000_000;

const IN_BAND_ERRORS: Record<string, (chunk: Record<string, unknown>) => Record<string, unknown>> = {
  "OpenRouter's error chunk (error beside choices, finish_reason error)": (c) => ({
    ...c,
    error: { code: 502, message: 'Provider disconnected unexpectedly', metadata: { error_type: 'provider_unavailable' } },
    choices: [{ index: 0, delta: { content: '' }, finish_reason: 'error' }],
  }),
  'an error beside empty choices': (c) => ({ ...c, error: { message: 'Worker local total request limit reached (33/32)', code: 502 }, choices: [] }),
  "vLLM's flat streaming ErrorResponse": () => ({ object: 'error', message: 'CUDA out of memory', type: 'InternalServerError', param: null, code: 500 }),
};

describe('a provider error reported in band mid-stream, then [DONE]', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const [name, errorChunk] of Object.entries(IN_BAND_ERRORS)) {
    test(`${name}: the client gets the spec's error event and [DONE], nothing is charged`, async () => {
      const w = await h.wallet(FUNDS);
      // The finish chunk is replaced by the error; the provider then ends the stream with [DONE], as it does after any chunk.
      h.fake.behaviour = {
        omitUsage: true,
        rewriteChunk: (json) => (json.includes('"finish_reason":"stop"') ? JSON.stringify(errorChunk(JSON.parse(json))) : json),
      };
      const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }),
      });
      assert.equal(res.status, 200);
      const events = await readSse(res);
      assert.ok(
        events.some((e) => e !== '[DONE]' && JSON.parse(e).choices?.[0]?.delta?.content),
        'part of the answer reached the client before the failure',
      );
      assert.equal(events.at(-1), '[DONE]');
      const last = JSON.parse(events.at(-2)!);
      assert.equal(last.error?.type, 'upstream_error', `the stream's last event is the spec's error event: ${events.at(-2)}`);
      await until(async () => (await usageRowsOf(h, w.keyId)).length === 1, 'the request closed');
      await expectNothingCharged(h, w, FUNDS);
    });
  }
});

describe("a non-streamed 200 answer that carries the provider's error", () => {
  /*
   * The same failure in a whole answer: OpenRouter answers 200 once a model started, and a failure
   * after that comes in the body, as an `error` object beside the partial choice (finish_reason
   * "error"). The defect: any JSON with a `choices` array was a completion, so the cut answer was
   * delivered as the answer and billed; the spec's "provider fails (non-streaming): HTTP 502, no
   * charge" did not hold.
   */
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('the client gets a 502 and nothing is charged', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = {
      rewriteAnswer: (json) => {
        const answer = JSON.parse(json);
        answer.error = { code: 502, message: 'Provider disconnected unexpectedly', metadata: { error_type: 'provider_unavailable' } };
        answer.choices[0].finish_reason = 'error';
        answer.choices[0].message.content = 'Hello from';
        return JSON.stringify(answer);
      },
    };
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }),
    });
    const text = await res.text();
    assert.equal(res.status, 502, text);
    assert.match(text, /Provider disconnected unexpectedly/);
    await expectNothingCharged(h, w, FUNDS);
  });
});
