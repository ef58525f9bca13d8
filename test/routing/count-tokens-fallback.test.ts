import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { CLAUDE_COUNT_MARGIN } from '../../src/metered/count-tokens.ts';
import { routingSuite, type RoutingHarness } from '../support/routing-harness.ts';

/*
 * POST /v1/messages/count_tokens counts with o200k and raises the count by CLAUDE_COUNT_MARGIN for a
 * model Anthropic serves, since Claude's tokenizer counts more for the same text and Claude Code
 * compacts its conversation by this count before it overflows the window. The defect: the margin
 * looked at the model's own provider only, so a model served by an OpenAI-compatible provider with
 * an Anthropic fallback (the routing harness's fake/to-claude) was counted without it, and a
 * conversation near the window, once the fallback served it, was larger than Claude Code believed.
 */
describe('count_tokens for a model with an Anthropic fallback', () => {
  const harness = routingSuite('sqlite', { prompt_tokens: 1, completion_tokens: 1 });
  let h: RoutingHarness;
  beforeEach(() => (h = harness()));

  const count = async (key: string, model: string) => {
    const res = await fetch(`${h.gw.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Summarise the state of the repository and list the failing tests. '.repeat(40) }] }),
    });
    assert.equal(res.status, 200);
    return ((await res.json()) as { input_tokens: number }).input_tokens;
  };

  test('is raised by the Claude margin, as for a model whose own provider is Anthropic', async () => {
    const w = await h.wallet(1_000_000);
    // fake/routed: the same kind of model, its deployments all OpenAI-compatible (no margin).
    const plain = await count(w.key, 'fake/routed');
    const withClaude = await count(w.key, 'fake/to-claude');
    assert.ok(plain > 100);
    assert.ok(withClaude >= Math.ceil(plain * CLAUDE_COUNT_MARGIN) - 1, `count ${withClaude} for a model Anthropic may serve; ${plain} without any`);
  });
});
