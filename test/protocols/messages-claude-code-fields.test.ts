import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeMessagesRequest } from '../../src/protocols/anthropic-messages/decode-request.ts';
import { MESSAGES_BETAS, MESSAGES_FIELDS, sortClientBetas } from '../../src/protocols/anthropic-messages/field-policy.ts';
import { checkMessagesRequest } from '../../src/protocols/anthropic-messages/request-checks.ts';
import type { ApiError } from '../../src/refusal.ts';

/**
 * The fields and betas Claude Code 2.1.332 sends (captured from the real binary; see
 * docs/DECISIONS.md, "Anthropic Messages inbound"), each handled on purpose: the translation onto chat completions
 * for an OpenAI-compatible model, and the beta allowlist for an Anthropic one.
 */
const ENVIRONMENT = '# Environment\nYou have been invoked in the following environment: …';
const USER_ID = JSON.stringify({ device_id: 'd'.repeat(64), account_uuid: '', session_id: '758d0653-dab8-404b-9dce-190ce8ee75ec' });

/** Claude Code's request on its default model, trimmed to one tool. */
const CLAUDE_CODE_REQUEST = {
  model: 'claude-opus-5-5',
  max_tokens: 128_000,
  stream: true,
  system: [
    { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.332.e8f; cc_entrypoint=sdk-cli;' },
    { type: 'text', text: 'You are a Claude agent.', cache_control: { type: 'ephemeral' } },
  ],
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: '<system-reminder>…</system-reminder>' },
        { type: 'text', text: 'say hi' },
      ],
    },
    { role: 'system', content: ENVIRONMENT, output_config: { effort: 'medium' } },
  ],
  tools: [
    { name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } },
    { name: 'DeferredToolPlaceholder', description: 'never call this tool', input_schema: { type: 'object', properties: {} }, defer_loading: true },
  ],
  metadata: { user_id: USER_ID },
  thinking: { type: 'adaptive', display: 'omitted' },
  context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
  output_config: { effort: 'medium' },
};

const refusedParam = (fn: () => unknown, param: string) => assert.throws(fn, (e: ApiError) => e.status === 400 && e.extra.param === param);

describe("Claude Code's request translated for an OpenAI-compatible model", () => {
  const PLAIN = { reasoningFamily: 'none', maxOutputTokens: 4096 };

  test('mid-conversation system messages stay system messages where they stood; cache_control and defer_loading are dropped', () => {
    const out = decodeMessagesRequest(CLAUDE_CODE_REQUEST, new Set(), PLAIN);
    assert.deepEqual(
      out.messages.map((m: any) => m.role),
      ['system', 'user', 'system'],
    );
    assert.equal(out.messages[2].content, ENVIRONMENT);
    assert.equal(out.messages[0].content, 'x-anthropic-billing-header: cc_version=2.1.332.e8f; cc_entrypoint=sdk-cli;\n\nYou are a Claude agent.');
    assert.deepEqual(
      out.tools.map((t: any) => Object.keys(t.function)),
      [
        ['name', 'parameters', 'description'],
        ['name', 'parameters', 'description'],
      ],
    );
  });

  test("max_tokens above the model's output window is lowered to it, not refused", () => {
    assert.equal(decodeMessagesRequest(CLAUDE_CODE_REQUEST, new Set(), PLAIN).max_tokens, 4096);
    assert.equal(decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, max_tokens: 100 }, new Set(), PLAIN).max_tokens, 100);
  });

  test("a model without reasoning gets no thinking, effort, context_management or output_config; Claude Code's long JSON user_id is not sent as user", () => {
    const out = decodeMessagesRequest(CLAUDE_CODE_REQUEST, new Set(), PLAIN);
    for (const field of ['thinking', 'reasoning_effort', 'context_management', 'output_config', 'metadata', 'user', 'cache_control'])
      assert.equal(out[field], undefined, field);
    assert.equal(decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, metadata: { user_id: 'user_abc' } }, new Set(), PLAIN).user, 'user_abc');
  });

  test('adaptive thinking becomes an effort for an effort model and a budget below max_tokens for a thinking model', () => {
    assert.equal(decodeMessagesRequest(CLAUDE_CODE_REQUEST, new Set(), { reasoningFamily: 'effort', maxOutputTokens: 100_000 }).reasoning_effort, 'medium');
    assert.equal(
      decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, output_config: { effort: 'max' } }, new Set(), { reasoningFamily: 'effort', maxOutputTokens: 100_000 })
        .reasoning_effort,
      'high',
    );
    assert.deepEqual(
      decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, output_config: { effort: 'high' } }, new Set(), { reasoningFamily: 'thinking', maxOutputTokens: 8000 })
        .thinking,
      { type: 'enabled', budget_tokens: 7999 },
    );
    // Claude Code on a model it knows: a budget of 31,999 within 32,000, lowered with max_tokens.
    const budget = decodeMessagesRequest(
      { ...CLAUDE_CODE_REQUEST, max_tokens: 32_000, thinking: { type: 'enabled', budget_tokens: 31_999, display: 'omitted' } },
      new Set(),
      { reasoningFamily: 'thinking', maxOutputTokens: 4096 },
    );
    assert.deepEqual([budget.max_tokens, budget.thinking], [4096, { type: 'enabled', budget_tokens: 4095 }]);
  });

  test('attack: values that change the price are refused by name on the translated path too', () => {
    refusedParam(
      () => decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, context_management: { edits: [{ type: 'compact_20260112' }] } }, new Set(), PLAIN),
      'context_management.edits[0]',
    );
    refusedParam(
      () => decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, output_config: { effort: 'medium', format: { type: 'json_schema' } } }, new Set(), PLAIN),
      'output_config.format',
    );
    refusedParam(() => decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, speed: 'fast' }, new Set(), PLAIN), 'speed');
    refusedParam(() => decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, inference_geo: 'us' }, new Set(), PLAIN), 'inference_geo');
    refusedParam(() => decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, container: 'c' }, new Set(), PLAIN), 'container');
    refusedParam(() => decodeMessagesRequest({ ...CLAUDE_CODE_REQUEST, workspace_id: 'w' }, new Set(), PLAIN), 'workspace_id');
    refusedParam(
      () =>
        decodeMessagesRequest(
          { ...CLAUDE_CODE_REQUEST, messages: [...CLAUDE_CODE_REQUEST.messages, { role: 'system', content: 'x', output_config: { effort: 'ultra' } }] },
          new Set(),
          PLAIN,
        ),
      'messages[2].output_config.effort',
    );
    // Standard values of the same fields pass (and are dropped).
    const out = decodeMessagesRequest(
      { ...CLAUDE_CODE_REQUEST, speed: 'standard', inference_geo: 'global', service_tier: 'auto', cache_control: { type: 'ephemeral' } },
      new Set(),
      PLAIN,
    );
    for (const field of ['speed', 'inference_geo', 'service_tier', 'cache_control']) assert.equal(out[field], undefined, field);
  });

  test('a system message holds text only', () => {
    checkMessagesRequest({
      model: 'm',
      max_tokens: 1,
      messages: [
        { role: 'user', content: 'q' },
        { role: 'system', content: [{ type: 'text', text: 'env' }] },
      ],
    });
    refusedParam(
      () => checkMessagesRequest({ model: 'm', max_tokens: 1, messages: [{ role: 'system', content: [{ type: 'tool_result', tool_use_id: 't' }] }] }),
      'messages[0].content',
    );
  });

  test('every field Claude Code sends has a policy with a reason', () => {
    for (const field of Object.keys(CLAUDE_CODE_REQUEST)) {
      const policy = MESSAGES_FIELDS[field];
      assert.ok(policy && policy.why.length > 10, field);
      assert.notEqual(policy.native, 'refuse', field);
    }
  });
});

describe('client anthropic-beta values', () => {
  const CLAUDE_CODE_BETAS =
    'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24';

  test('every beta Claude Code 2.1.332 sends is price-neutral and forwarded', () => {
    assert.deepEqual(sortClientBetas(CLAUDE_CODE_BETAS), { forward: CLAUDE_CODE_BETAS.split(','), dropped: [] });
  });

  test('an unknown beta is not forwarded, and named as dropped; several headers are read as one list', () => {
    assert.deepEqual(sortClientBetas(['claude-code-20250219, some-new-beta-2027-01-01', 'claude-code-20250219']), {
      forward: ['claude-code-20250219'],
      dropped: ['some-new-beta-2027-01-01'],
    });
    assert.deepEqual(sortClientBetas('bad name,<script>'), { forward: [], dropped: [] });
    assert.deepEqual(sortClientBetas(undefined), { forward: [], dropped: [] });
  });

  test('attack: betas that change the price are refused by name', () => {
    for (const [beta, policy] of Object.entries(MESSAGES_BETAS)) {
      if (policy.action !== 'refuse') continue;
      assert.throws(
        () => sortClientBetas(`claude-code-20250219,${beta}`),
        (e: ApiError) => e.status === 400 && e.message.includes(beta) && e.extra.param === 'anthropic-beta',
        beta,
      );
    }
    assert.equal(MESSAGES_BETAS['context-1m-2025-08-07']?.action, 'refuse');
  });

  test('attack: a list of thousands of betas is refused before it is read', () => {
    assert.throws(
      () => sortClientBetas(Array.from({ length: 1000 }, (_, i) => `b${i}`).join(',')),
      (e: ApiError) => e.extra.param === 'anthropic-beta',
    );
  });
});
