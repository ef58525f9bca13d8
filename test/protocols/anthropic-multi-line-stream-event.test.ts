import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { waitForUsageRow } from '../support/usage-rows.ts';

/*
 * SSE lets one event carry its data over several `data:` lines, joined with a newline: an Anthropic
 * provider (or a proxy before it) that writes an event's JSON over lines sends valid JSON, and the
 * gateway decodes and bills it as such. The defect: a native Messages client was relayed that data
 * as it came, newline included, after one `data: `, so its SSE parser read only the first line as
 * the event's data: the Anthropic SDK throws on it, the client lost its answer, and it was charged.
 */
const FUNDS = 50_000_000;

describe('an Anthropic provider event whose data spans several lines (native Messages)', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE] });
  });
  beforeEach(() => resetProviders(h));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('the Anthropic SDK reads the whole answer, charged once', async () => {
    const w = await h.wallet(FUNDS);
    // Every event's JSON broken over two data lines after its "type" (still JSON once joined).
    h.anthropic.behaviour = {
      usage: { input_tokens: 100, output_tokens: 50 },
      rewriteAnswer: (json) => json.replace(/^\{"type":("[a-z_]+"),/, '{"type":$1,\ndata: '),
    };
    const client = new Anthropic({ baseURL: h.gw.url, apiKey: w.key, maxRetries: 0 });
    const stream = client.messages.stream({ model: 'anth/claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    const message = await stream.finalMessage();
    const text = message.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    assert.ok(text.length > 0, 'the answer arrived');
    const row = await waitForUsageRow(h, w.keyId);
    assert.equal(row.status, 'ok');
    const taken = FUNDS - (await h.balance(w.account)).balance_usdc;
    assert.equal(Number(row.charged_usdc), taken);
    assert.ok(taken > 0);
  });
});
