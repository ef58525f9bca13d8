import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { waitForUsageRow } from '../support/usage-rows.ts';

/*
 * SSE lets one event carry its data over several `data:` lines, joined with a newline: a provider
 * (or a proxy) that writes its chunk JSON pretty-printed over lines sends valid JSON, and the
 * gateway reads it as such. The defect: a chat client was relayed that data as it came, newline
 * included, in one `data: ` line, so the client's SSE parser read only the first line as the event
 * (`data: {"id":…,` and the rest as unknown fields): the openai SDK throws on it (spec 4.7 rule 1:
 * each event line is `data: <JSON chunk>`), the client lost its answer, and it was charged in full.
 */
const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
/** 100 × 1.2 + 50 × 2.4 micro-USDC (chat-small's listed price). */
const CHARGE = 240;

describe('a provider stream event whose data spans several lines', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('the chat client gets each chunk as one data line: the openai SDK reads the whole answer, charged once', async () => {
    const w = await h.wallet(FUNDS);
    // Every chunk's JSON broken over two data lines at its "choices" (still JSON once joined).
    h.fake.behaviour = { usage: USAGE, rewriteChunk: (json) => json.replace('"choices":', '\ndata: "choices":') };
    const stream = await h.client(w.key).chat.completions.create({
      model: 'fake/chat-small',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let charged: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) charged = (chunk.usage as { charged_usdc?: unknown }).charged_usdc;
    }
    assert.equal(text, 'Hello from the fake provider, a stand-in for a paid model.');
    assert.equal(charged, CHARGE);
    const row = await waitForUsageRow(h, w.keyId);
    assert.deepEqual([row.status, Number(row.charged_usdc)], ['ok', CHARGE]);
    assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS - CHARGE, locked_usdc: 0, available_usdc: FUNDS - CHARGE });
  });
});
