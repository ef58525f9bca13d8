import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { sseBlocks } from '../support/sse.ts';
import { expectNothingCharged, usageRowsOf } from '../support/usage-rows.ts';
import { until } from '../support/until.ts';

/*
 * An OpenAI-compatible provider whose 200 stream carries an event that is not JSON (a chunk cut in
 * the middle by a proxy, an HTML error page written into the stream) has broken its answer. The
 * spec says each event the client gets is `data: <JSON chunk>` (4.7 rule 1) and docs/DECISIONS.md
 * says a 2xx whose body does not decode ends a stream with the protocol's error event, nothing
 * charged, as an Anthropic upstream's non-JSON event already does. The defect: the chat decoder
 * handed the event on as content, so a chat client was sent `data: {"id":"chatcmpl-fake` (the
 * openai SDK throws on it) while a Responses or Messages client silently lost that piece of the
 * answer, and every one of them was charged the whole answer once the provider's [DONE] came.
 */
const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const HI = [{ role: 'user', content: 'hi' }];

const PROTOCOLS = [
  {
    name: 'chat completions',
    path: '/v1/chat/completions',
    body: { model: 'fake/chat-small', messages: HI, stream: true, stream_options: { include_usage: true } },
    /** The stream ends with the spec's error event, then [DONE], and nothing after it. */
    endsWithError(blocks: string[]) {
      assert.equal(blocks.at(-1), 'data: [DONE]');
      const error = JSON.parse(blocks.at(-2)!.replace(/^data: /, '')).error;
      assert.deepEqual(Object.keys(error).sort(), ['message', 'type']);
      assert.equal(error.type, 'upstream_error');
      return error.message as string;
    },
  },
  {
    name: 'Responses',
    path: '/v1/responses',
    body: { model: 'fake/chat-small', input: 'hi', stream: true },
    endsWithError(blocks: string[]) {
      const [error, failed] = blocks.slice(-2).map((b) => JSON.parse(b.split('\n')[1]!.replace(/^data: /, '')));
      assert.equal(error.type, 'error');
      assert.equal(failed.type, 'response.failed');
      return error.message as string;
    },
  },
  {
    name: 'Messages',
    path: '/v1/messages',
    body: { model: 'fake/chat-small', max_tokens: 100, messages: HI, stream: true },
    endsWithError(blocks: string[]) {
      const [event, data] = blocks.at(-1)!.split('\n');
      assert.equal(event, 'event: error');
      const parsed = JSON.parse(data!.replace(/^data: /, ''));
      assert.equal(parsed.error.type, 'api_error');
      return parsed.error.message as string;
    },
  },
];

describe('a provider stream event that is not JSON', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const p of PROTOCOLS) {
    test(`${p.name}: the stream ends with the protocol's error event, the broken event never relayed; nothing charged`, async () => {
      const w = await h.wallet(FUNDS);
      let chunks = 0;
      // The third chunk (the second word) is cut in the middle; the rest of the answer, its usage and [DONE] follow as usual.
      h.fake.behaviour = { usage: USAGE, rewriteChunk: (json) => (++chunks === 3 ? json.slice(0, 20) : json) };
      const res = await fetch(`${h.gw.url}${p.path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify(p.body),
      });
      assert.equal(res.status, 200);
      const blocks = sseBlocks(await res.text());
      for (const b of blocks) {
        const data = b
          .split('\n')
          .find((l) => l.startsWith('data: '))!
          .slice('data: '.length);
        if (data !== '[DONE]') assert.doesNotThrow(() => JSON.parse(data), `every event the client gets is JSON: ${data}`);
      }
      assert.match(p.endsWithError(blocks), /the provider sent an event that is not JSON; nothing was charged$/);
      await until(async () => (await usageRowsOf(h, w.keyId)).length === 1, 'the request closed');
      await expectNothingCharged(h, w, FUNDS);
    });
  }
});
