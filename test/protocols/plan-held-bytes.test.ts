import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { planInbound } from '../../src/metered/plan/inbound.ts';
import { planChat } from '../../src/metered/plan/plan.ts';
import type { ChatPlan } from '../../src/metered/plan/plan.ts';
import { anthropicMessagesInbound } from '../../src/protocols/anthropic-messages/inbound.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';

/**
 * A plan lives as long as its request, a stream's for its whole life, and the HTTP client keeps the
 * body it sends until the answer ends. An agent's prompt is tens of KB: a plan that kept the request
 * serialised as a string beside the client's bytes held it once more per stream (bench/README.md,
 * "What a held stream holds"). The request is kept once, as the bytes that are sent.
 */
const config = parseConfig(
  {
    providers: { oai: { baseUrl: 'http://127.0.0.1:9/v1' }, anth: { type: 'anthropic', baseUrl: 'http://127.0.0.1:9' } },
    models: [
      { provider: 'oai', name: 'gpt', contextLength: 1_000_000, maxOutputTokens: 1000, promptCostPer1M: '1', completionCostPer1M: '1' },
      { provider: 'anth', name: 'claude', contextLength: 1_000_000, maxOutputTokens: 1000, promptCostPer1M: '1', completionCostPer1M: '1' },
    ],
  },
  {},
);
const catalog = buildCatalog(config);
const PROMPT = 'Context line. '.repeat(5000);

/** Every string and buffer reachable from `root` through objects and arrays. */
function reachable(root: unknown): { strings: string[]; buffers: Buffer[] } {
  const seen = new Set<object>();
  const out = { strings: [] as string[], buffers: [] as Buffer[] };
  const visit = (v: unknown) => {
    if (typeof v === 'string') out.strings.push(v);
    else if (Buffer.isBuffer(v)) out.buffers.push(v);
    else if (v && typeof v === 'object' && !seen.has(v)) {
      seen.add(v);
      for (const child of Object.values(v)) visit(child);
    }
  };
  visit(root);
  return out;
}

function assertHeldOnceAsBytes(plan: ChatPlan, model: string): void {
  const { strings, buffers } = reachable(plan);
  const serialised = strings.filter((s) => s.length > PROMPT.length && s.includes(`"model":"${model}"`));
  assert.deepEqual(
    serialised.map((s) => s.slice(0, 40)),
    [],
    'no serialised copy of the request is kept beside the bytes',
  );
  const sent = buffers.find((b) => b.length > PROMPT.length);
  assert.ok(sent, 'the request is kept as the bytes sent');
  assert.equal(JSON.parse(sent.toString()).messages.at(-1).content, PROMPT);
}

test('a translated plan keeps its upstream request once, as the bytes that are sent', () => {
  const plan = planChat({ model: 'oai/gpt', max_tokens: 10, stream: true, messages: [{ role: 'user', content: PROMPT }] }, catalog, config);
  assertHeldOnceAsBytes(plan, 'gpt');
});

test("a native Messages plan keeps the client's request once, as the bytes that are sent", () => {
  const body = { model: 'anth/claude', max_tokens: 10, stream: true, messages: [{ role: 'user', content: PROMPT }] };
  assertHeldOnceAsBytes(planInbound(anthropicMessagesInbound, body, catalog, config), 'claude');
});
