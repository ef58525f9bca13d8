import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { readSse, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';
import { MAX_EVENT_CHARS } from '../../src/metered/stream-pump.ts';

/*
 * A stream is complete at the provider's `data: [DONE]` (docs/DECISIONS.md: the rest of its body is
 * read for at most a second, only so the connection is kept), and the openai SDK ignores every
 * event after [DONE]. The defect: the gateway went on decoding what followed. An error event after
 * [DONE] turned the answer the client had whole into the spec's error event, voided (the provider
 * billed it; the agent, told it failed, sends it again), and a chunk after [DONE] was relayed to the
 * client as more of its answer, ahead of the gateway's own [DONE].
 */
const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
/** 100 × 1.2 + 50 × 2.4 micro-USDC (chat-small's listed price). */
const CHARGE = 240;

const AFTER_DONE: Record<string, string> = {
  'an error event': JSON.stringify({ error: { message: 'late failure', type: 'server_error' } }),
  'a content chunk': JSON.stringify({ id: 'x', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'EXTRA' }, finish_reason: null }] }),
  // Over the bound of one event: parsed, it failed (and voided) the stream the client had whole.
  'an event over the size bound': 'x'.repeat(MAX_EVENT_CHARS + 1_000_000),
};

describe('events a provider sends after its [DONE]', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const [name, event] of Object.entries(AFTER_DONE)) {
    test(`${name} after [DONE] is not read: the answer as delivered, [DONE] last, charged once`, async () => {
      const w = await h.wallet(FUNDS);
      // After its usage chunk the provider writes [DONE], then the late event (and its own [DONE] again).
      h.fake.behaviour = { usage: USAGE, rewriteChunk: (json) => (json.includes('"choices":[]') ? `${json}\n\ndata: [DONE]\n\ndata: ${event}` : json) };
      const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }),
      });
      assert.equal(res.status, 200);
      const events = await readSse(res);
      assert.equal(events.at(-1), '[DONE]');
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.equal(chunks.filter((c) => c.error).length, 0, 'no error event');
      assert.equal(chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join(''), 'Hello from the fake provider, a stand-in for a paid model.');
      assert.equal(chunks.at(-1).usage?.charged_usdc, CHARGE);
      const row = await waitForUsageRow(h, w.keyId);
      assert.deepEqual([row.status, Number(row.charged_usdc)], ['ok', CHARGE]);
      assert.equal((await usageRowsOf(h, w.keyId)).length, 1);
      assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS - CHARGE, locked_usdc: 0, available_usdc: FUNDS - CHARGE });
    });
  }
});
