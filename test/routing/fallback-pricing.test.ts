import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { ENGINES } from '../support/engines.ts';
import { postChat, routingSuite, type RoutingHarness } from '../support/routing-harness.ts';
import { usageRowsOf } from '../support/usage-rows.ts';

/**
 * Claude through an OpenAI-compatible router (the model's own provider type) with Anthropic itself
 * as a deployment: Anthropic bills cache writes at 1.25× its prompt price, and the model billed them
 * by its own type (the prompt price with the markup, 1.2×), so a request that wrote the cache on
 * Anthropic was sold below cost (359,820 charged against a provider cost of 374,768 micro-USDC).
 * Now every part is billed at least at the dearest deployment's cost (its cost × markup when no
 * price is listed), and a listed price below a deployment's cost is refused at start-up.
 */
const CLAUDE_VIA_ROUTER = { provider: 'fake', contextLength: 200_000, maxOutputTokens: 8192, promptCostPer1M: '3', completionCostPer1M: '15' };
const MODELS = [
  { ...CLAUDE_VIA_ROUTER, name: 'claude-via-router', fallbacks: [{ provider: 'anth', upstreamName: 'claude-at-anthropic' }] },
  { ...CLAUDE_VIA_ROUTER, name: 'claude-weighted', weight: 1, fallbacks: [{ provider: 'anth', upstreamName: 'claude-weighted-anthropic', weight: 1 }] },
];
/** A prompt mostly written to the cache: 1,000 uncached tokens, 100,000 cache writes, 500 output tokens. */
const ANTHROPIC_USAGE = { input_tokens: 1000, cache_creation_input_tokens: 100_000, output_tokens: 500 };
/** The same usage as a router reports it in OpenAI's shape with Anthropic's cache names. */
const ROUTER_USAGE = { prompt_tokens: 101_000, completion_tokens: 500 };
const ROUTER_CACHE_NAMES = { cache_creation_input_tokens: 100_000, cache_read_input_tokens: 0 };
const CACHED_PROMPT = [{ role: 'user', content: [{ type: 'text', text: 'a long document to cache', cache_control: { type: 'ephemeral' } }] }];

for (const engine of ENGINES)
  describe(`attack: a fallback of another provider type is never sold below its cost (${engine})`, () => {
    const harness = routingSuite(engine, ROUTER_USAGE, { models: MODELS });
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    test('the router fails, Anthropic serves and writes the cache: the charge covers its 1.25× cache writes', async () => {
      const w = await h.wallet(10_000_000);
      h.fake.behaviour = { failStatus: 503 };
      h.anthropic.behaviour = { usage: ANTHROPIC_USAGE };
      const res = await postChat(h, w.key, { model: 'fake/claude-via-router', messages: CACHED_PROMPT, max_tokens: 500 });
      await res.text();
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-deployment'), 'anth/claude-at-anthropic');
      // Anthropic's cost: 1,000 × 3 + 100,000 × 3.75 + 500 × 15. Billed: the prompt and completion at
      // cost × 1.2, cache writes at the dearest deployment's (Anthropic's 3.75) × 1.2 = 4.5.
      const cost = 1000 * 3 + 100_000 * 3.75 + 500 * 15;
      const charge = 1000 * 3.6 + 100_000 * 4.5 + 500 * 18;
      const [row] = await usageRowsOf(h, w.keyId);
      assert.deepEqual([row!.deployment, Number(row!.provider_cost_usdc), Number(row!.charged_usdc)], ['anth/claude-at-anthropic', cost, charge]);
      assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), charge);
    });

    test('weighted deployments, no failure: every request is billed at least what its deployment cost', async () => {
      const w = await h.wallet(100_000_000);
      h.fake.behaviour = { usage: ROUTER_USAGE, usageExtra: ROUTER_CACHE_NAMES };
      h.anthropic.behaviour = { usage: ANTHROPIC_USAGE };
      for (let i = 0; i < 16; i++) {
        const res = await postChat(h, w.key, { model: 'fake/claude-weighted', messages: CACHED_PROMPT, max_tokens: 500 });
        assert.equal(res.status, 200, await res.text());
      }
      const rows = await usageRowsOf(h, w.keyId);
      // Weights 1 and 1: each deployment serves about half (both serving is all but certain over 16 draws).
      assert.deepEqual(new Set(rows.map((r) => r.deployment)), new Set(['fake/claude-weighted', 'anth/claude-weighted-anthropic']));
      const losses = rows.filter((r) => Number(r.charged_usdc) < Number(r.provider_cost_usdc));
      assert.deepEqual(
        losses.map((r) => [r.deployment, Number(r.charged_usdc), Number(r.provider_cost_usdc)]),
        [],
        'requests sold below their cost',
      );
    });
  });
