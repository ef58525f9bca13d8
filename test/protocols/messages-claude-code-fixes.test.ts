import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { countMessageTokens } from '../../src/metered/count-tokens.ts';
import { planInbound } from '../../src/metered/plan/inbound.ts';
import { upstreamFailure } from '../../src/metered/upstream-error.ts';
import { parseConfig } from '../../src/config/load.ts';
import { retryHeaders } from '../../src/http/errors.ts';
import { decodeMessagesRequest } from '../../src/protocols/anthropic-messages/decode-request.ts';
import { anthropicMessagesInbound } from '../../src/protocols/anthropic-messages/inbound.ts';
import { thinkingFor } from '../../src/protocols/anthropic-messages/thinking.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';
import { ApiError } from '../../src/refusal.ts';

/** The fixes for the review in messages-claude-code-attacks.test.ts, beyond what its attacks show. */

const config = parseConfig(
  {
    providers: { anth: { type: 'anthropic' } },
    models: [
      {
        provider: 'anth',
        name: 'claude',
        contextLength: 200_000,
        maxOutputTokens: 8000,
        promptCostPer1M: '1',
        completionCostPer1M: '1',
        cacheWriteCostPer1M: '1.25',
        cacheReadCostPer1M: '0.1',
      },
    ],
  },
  {},
);
const catalog = buildCatalog(config);
const plan = (body: unknown) => planInbound(anthropicMessagesInbound, body, catalog, config, {});
const HI = [{ role: 'user', content: 'hi' }];

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  assert.fail('accepted');
}

describe('message keys, thinking and nested cache_control', () => {
  test('a message key other than role, content and output_config is refused by name, native and translated', () => {
    const body = { model: 'anth/claude', max_tokens: 10, messages: [{ role: 'user', content: 'hi', name: 'x' }] };
    assert.equal(refusal(() => plan(body)).extra.param, 'messages[0].name');
    assert.equal(refusal(() => decodeMessagesRequest(body)).extra.param, 'messages[0].name');
    assert.ok(plan({ ...body, messages: [{ role: 'user', content: 'hi', output_config: { effort: 'low' } }] }));
  });

  test('thinking: only enabled, adaptive and disabled, and only type, budget_tokens and display', () => {
    for (const thinking of [
      { type: 'enabled', budget_tokens: 2048 },
      { type: 'adaptive' },
      { type: 'disabled' },
      { type: 'enabled', budget_tokens: 2048, display: 'summarized' },
    ]) {
      assert.ok(plan({ model: 'anth/claude', max_tokens: 8000, thinking, messages: HI }), JSON.stringify(thinking));
    }
    const extraKey = { model: 'anth/claude', max_tokens: 8000, thinking: { type: 'adaptive', budget_tokens_max: 100_000 }, messages: HI };
    assert.equal(refusal(() => plan(extraKey)).extra.param, 'thinking.budget_tokens_max');
    assert.equal(refusal(() => decodeMessagesRequest(extraKey)).extra.param, 'thinking.budget_tokens_max');
    assert.equal(refusal(() => decodeMessagesRequest({ ...extraKey, thinking: { type: 'interleaved' } })).extra.param, 'thinking.type');
    assert.equal(refusal(() => plan({ ...extraKey, thinking: 'enabled' })).extra.param, 'thinking');
    // A chat-completions request whose thinking goes to Anthropic is held to the same.
    const other = thinkingFor({ type: 'enabled_extended', budget_tokens: 100_000 }, undefined, 8000);
    assert.equal(other.ok, false);
    assert.equal((other as { field: string }).field, 'thinking.type');
    assert.equal((thinkingFor({ type: 'enabled', budget_tokens: 2048, extra: 1 }, undefined, 8000) as { field?: string }).field, 'thinking.extra');
  });

  test('ttl "1h" is refused at any depth of nested content, with its path; "5m" passes there', () => {
    const nested = (cache_control: unknown) => ({
      model: 'anth/claude',
      max_tokens: 10,
      messages: [
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 't',
              content: [{ type: 'search_result', source: 's', title: 't', content: [{ type: 'text', text: 'x', cache_control }] }],
            },
          ],
        },
      ],
    });
    assert.equal(refusal(() => plan(nested({ type: 'ephemeral', ttl: '1h' }))).extra.param, 'messages[0].content[0].content[0].content[0].cache_control');
    assert.ok(plan(nested({ type: 'ephemeral', ttl: '5m' })));
    assert.ok(plan(nested({ type: 'ephemeral' })));
  });

  test("count_tokens checks the key's model list before it counts anything", async () => {
    const forbidden = new ApiError(403, 'MODEL_NOT_ALLOWED', 'no');
    let seen = '';
    await assert.rejects(
      countMessageTokens({ model: 'anth/claude', messages: HI }, catalog, (m) => {
        seen = m.id;
        throw forbidden;
      }),
      (err) => err === forbidden,
    );
    assert.equal(seen, 'anth/claude');
  });
});

describe('retry headers', () => {
  test("a provider's own refusal (400-404, 413) relayed as 502 says x-should-retry: false; a 5xx does not", () => {
    for (const status of [400, 401, 402, 403, 404, 413]) {
      const err = upstreamFailure(`the provider answered ${status}`, '', { status, headers: {} });
      assert.equal(err.status, 502);
      assert.equal(retryHeaders(err)['x-should-retry'], 'false', String(status));
    }
    for (const status of [500, 502, 529]) assert.equal(retryHeaders(upstreamFailure('x', '', { status, headers: {} }))['x-should-retry'], undefined);
    assert.equal(retryHeaders(upstreamFailure('the provider request failed'))['x-should-retry'], undefined);
  });

  test("a busy provider's Retry-After (seconds) is passed on; anything else in it is not", () => {
    assert.equal(retryHeaders(upstreamFailure('x', '', { status: 429, headers: { 'retry-after': '7' } }))['retry-after'], '7');
    assert.equal(retryHeaders(upstreamFailure('x', '', { status: 529, headers: { 'retry-after': ['12'] } }))['retry-after'], '12');
    assert.equal(retryHeaders(upstreamFailure('x', '', { status: 429, headers: { 'retry-after': '7\r\nx-evil: 1' } }))['retry-after'], undefined);
    assert.equal(retryHeaders(upstreamFailure('x', '', { status: 400, headers: { 'retry-after': '7' } }))['retry-after'], undefined);
  });

  test("a 402 with its own Retry-After (funds held by the wallet's requests in flight) is retryable; a plain 402 is not", () => {
    const held = retryHeaders(new ApiError(402, 'INSUFFICIENT_BALANCE', 'held', {}, { 'retry-after': '1' }));
    assert.equal(held['x-should-retry'], undefined);
    assert.equal(held['retry-after'], '1');
    assert.equal(retryHeaders(new ApiError(402, 'INSUFFICIENT_BALANCE', 'poor'))['x-should-retry'], 'false');
  });
});
