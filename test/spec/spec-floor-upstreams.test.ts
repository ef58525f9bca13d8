import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { call } from '../support/gateway.ts';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';

/**
 * Spec 2.6, 3.2, 4.7 and 7 for /v1/chat/completions hold whatever the upstream: an OpenAI-compatible
 * provider that reports no usage, and an Anthropic provider behind the OpenAI protocol.
 */
describe('spec floor: the chat completion answer whatever the upstream (default configuration)', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  function assertChatCompletion(r: any, content: string) {
    assert.equal(typeof r.id, 'string');
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].index, 0);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(r.choices[0].message.content, content);
    assert.equal(typeof r.choices[0].finish_reason, 'string');
    for (const f of ['prompt_tokens', 'completion_tokens', 'total_tokens']) assert.ok(Number.isInteger(r.usage?.[f]), `usage.${f}: ${JSON.stringify(r.usage)}`);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  }

  test('2.6: an OpenAI-compatible provider that reports no usage still gives usage integers', async () => {
    resetProviders(h, {}, { content: 'no usage here', omitUsage: true });
    const { key } = await h.wallet(10_000_000);
    const r = await h.client(key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    assertChatCompletion(r, 'no usage here');
  });

  test('2.6 / 4.7: an Anthropic model through the openai SDK: the chat.completion object; max_tokens 1024 by default', async () => {
    resetProviders(h, { content: 'from claude' });
    const { key } = await h.wallet(10_000_000);
    const r = await h.client(key).chat.completions.create({ model: 'anth/claude-test', messages: [{ role: 'user', content: 'hi' }] });
    assertChatCompletion(r, 'from claude');
    assert.equal((h.anthropic.received.at(-1)!.body as any).max_tokens, 1024);
  });

  test('3.2 / 7: an Anthropic provider failing is 502 UPSTREAM_ERROR, nothing locked or charged', async () => {
    for (const failStatus of [500, 529, 400]) {
      resetProviders(h, { failStatus });
      const { key, account } = await h.wallet(10_000_000);
      const res = await call(
        h.gw.url,
        'POST',
        '/v1/chat/completions',
        { model: 'anth/claude-test', messages: [{ role: 'user', content: 'hi' }] },
        { authorization: `Bearer ${key}` },
      );
      assert.equal(res.status, 502, `${failStatus}: ${res.text}`);
      assert.equal(res.body.error, 'UPSTREAM_ERROR');
      assert.equal(typeof res.body.message, 'string');
      const b = await h.balance(account);
      assert.equal(b.balance_usdc, 10_000_000);
      assert.equal(b.locked_usdc, 0);
    }
  });
});
