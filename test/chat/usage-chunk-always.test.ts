import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startAnthropicHarness, resetProviders, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { waitForUsageRow } from '../support/usage-rows.ts';

/**
 * docs/api.md "The charge in the answer": a streamed chat completion that asked for
 * `stream_options.include_usage` gets the charge in "the last chunk's usage (choices: [])". When the
 * provider reported no usage-only chunk, the gateway still billed (an estimate, or the provider's
 * usage that rode on a content chunk), yet the client that asked for the usage chunk got none: the
 * gateway now writes it from the billed usage.
 */
describe('a stream that asked for include_usage, with no usage-only chunk from the provider', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  const stream = async (key: string) => {
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({
        model: 'fake/chat-small',
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 50,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    const text = await res.text();
    const chunks = text
      .split('\n\n')
      .filter((b) => b.startsWith('data: ') && b !== 'data: [DONE]')
      .map((b) => JSON.parse(b.slice(6)));
    return chunks;
  };

  test('the provider sent no usage: the client gets a usage chunk with the estimate and its charge', async () => {
    resetProviders(h, {}, { content: 'one two three four five', omitUsage: true });
    const w = await h.wallet(5_000_000);
    const chunks = await stream(w.key);
    const row = await waitForUsageRow(h, w.keyId);
    assert.ok(Number(row.charged_usdc) > 0, 'the request was billed');
    const usageChunk = chunks.find((c) => c.usage && typeof c.usage === 'object');
    assert.ok(usageChunk, `a client that asked include_usage and was charged ${row.charged_usdc} got no usage chunk: ${JSON.stringify(chunks.at(-1))}`);
    assert.equal(usageChunk.usage.charged_usdc, Number(row.charged_usdc));
    assert.deepEqual(usageChunk.choices, []);
    assert.equal(usageChunk.object, 'chat.completion.chunk');
    assert.equal(usageChunk.id, chunks[0].id, "the stream's id");
    assert.equal(usageChunk.usage.completion_tokens, Number(row.completion_tokens), 'the billed (estimated) usage');
    assert.equal(chunks.at(-1), usageChunk, 'the last chunk before [DONE]');
  });

  test('a client that did not ask gets no usage chunk, whatever the provider sent', async () => {
    resetProviders(h, {}, { content: 'one two three four five', omitUsage: true });
    const w = await h.wallet(5_000_000);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
      body: JSON.stringify({ model: 'fake/chat-small', stream: true, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const text = await res.text();
    assert.ok(!text.includes('"usage"'), text.slice(-300));
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  });

  test('the provider put its usage on the finish chunk: the charge still reaches the client in a usage chunk', async () => {
    // Some OpenAI-compatible providers send the usage on the last content chunk rather than a usage-only chunk.
    resetProviders(
      h,
      {},
      {
        content: 'one two three four five',
        rewriteChunk: (json) => {
          const c = JSON.parse(json);
          if (Array.isArray(c.choices) && c.choices.length === 0) return JSON.stringify({ ...c, choices: [], usage: undefined, x: 1 }).replace(',"x":1', '');
          if (c.choices?.[0]?.finish_reason === 'stop') return JSON.stringify({ ...c, usage: { prompt_tokens: 9, completion_tokens: 5, total_tokens: 14 } });
          return json;
        },
      },
    );
    const w = await h.wallet(5_000_000);
    const chunks = await stream(w.key);
    const row = await waitForUsageRow(h, w.keyId);
    assert.ok(Number(row.charged_usdc) > 0, 'the request was billed');
    const withCharge = chunks.find((c) => c.usage && typeof c.usage === 'object' && 'charged_usdc' in c.usage);
    assert.ok(withCharge, `charged ${row.charged_usdc} but no chunk carries the charge; usage chunks: ${JSON.stringify(chunks.filter((c) => c.usage))}`);
  });
});
