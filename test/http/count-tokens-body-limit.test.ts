import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CLAUDE, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';

/*
 * count_tokens costs CPU time per byte and no money, so it has a body limit of its own
 * (limits.countTokensBodyBytes), apart from the chat routes' limits.chatBodyBytes: an operator who
 * lets paid requests carry large prompts need not let free counts carry them too.
 */
const LIMIT = 256 * 1024;
const NATIVE = 'anth/claude-test';

/** A Messages body of exactly `bytes` bytes of JSON. */
function bodyOf(bytes: number, extra: Record<string, unknown> = {}): string {
  const shell = JSON.stringify({ model: NATIVE, ...extra, messages: [{ role: 'user', content: '' }] });
  const body = JSON.stringify({ model: NATIVE, ...extra, messages: [{ role: 'user', content: 'word '.repeat(bytes).slice(0, bytes - shell.length) }] });
  assert.equal(Buffer.byteLength(body), bytes);
  return body;
}

describe("count_tokens' own body limit", () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE], limits: { countTokensBodyBytes: LIMIT } });
  });
  after(() => h.stop());

  const post = (path: string, key: string, body: string) =>
    fetch(`${h.gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body });

  test('a body over limits.countTokensBodyBytes is a 413 on count_tokens, while /v1/messages takes it under its own limit', async () => {
    const w = await h.wallet(10_000_000);
    const atLimit = await post('/v1/messages/count_tokens', w.key, bodyOf(LIMIT));
    assert.equal(atLimit.status, 200, await atLimit.text());

    const over = bodyOf(LIMIT + 1024);
    const refused = await post('/v1/messages/count_tokens', w.key, over);
    const text = await refused.text();
    assert.equal(refused.status, 413, text);
    assert.match(text, /request body is too large/);

    const served = await post('/v1/messages', w.key, bodyOf(LIMIT + 1024, { max_tokens: 10 }));
    assert.equal(served.status, 200, await served.text());
    await h.gw.assertLedger();
  });
});
