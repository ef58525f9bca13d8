import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { readSse, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { expectNothingCharged, usageRowsOf } from '../support/usage-rows.ts';
import { until } from '../support/until.ts';

/*
 * An SSE event named `error` is a failure in OpenAI's stream format whatever its data says: the
 * openai SDK raises any `event: error` as an APIError (`data.error ?? data`), not only a payload
 * with an `error` key. An OpenAI-compatible provider that fails mid-stream that way (a bare
 * `{"message": …}` under `event: error`) had the event name dropped by the gateway, which reads
 * only `data:`: the payload reached the client as an ordinary chunk its SDK skips, the stream went
 * on to [DONE], and the cut answer was billed as delivered. The same failure in Anthropic's format
 * (`{"type":"error","error":{…}}`) from an OpenAI-compatible deployment (a proxy in front of Claude)
 * was already caught by its `error` key; it is pinned beside it.
 */
const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };

const NAMED_ERRORS: Record<string, { data: unknown; message: RegExp }> = {
  'a bare message under event: error': {
    data: { message: 'The server had an error while processing your request' },
    message: /^the provider reported an error: The server had an error while processing your request; nothing was charged$/,
  },
  "Anthropic's error event, from an OpenAI-compatible deployment": {
    data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
    message: /^the provider reported an error: Overloaded; nothing was charged$/,
  },
};

describe('a provider stream event named error, mid-answer, then the rest and [DONE]', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const [name, { data, message }] of Object.entries(NAMED_ERRORS)) {
    test(`${name}: the spec's error event then [DONE], nothing after it; nothing charged`, async () => {
      const w = await h.wallet(FUNDS);
      let chunks = 0;
      // After the third chunk the provider writes its error event; it then carries on to its usage and [DONE].
      h.fake.behaviour = {
        usage: USAGE,
        rewriteChunk: (json) => (++chunks === 3 ? `${json}\n\nevent: error\ndata: ${JSON.stringify(data)}` : json),
      };
      const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }),
      });
      assert.equal(res.status, 200);
      const events = await readSse(res);
      assert.equal(events.at(-1), '[DONE]');
      const error = JSON.parse(events.at(-2)!).error;
      assert.deepEqual(Object.keys(error ?? {}).sort(), ['message', 'type'], `the stream's last event is the spec's error event: ${events.at(-2)}`);
      assert.equal(error.type, 'upstream_error');
      assert.match(error.message, message);
      await until(async () => (await usageRowsOf(h, w.keyId)).length === 1, 'the request closed');
      await expectNothingCharged(h, w, FUNDS);
    });
  }
});
