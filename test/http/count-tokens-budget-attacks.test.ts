import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CLAUDE, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { laneLength } from '../../src/cpu-lane.ts';
import { until } from '../support/until.ts';
import { maximalCountBody } from '../support/maximal-count-body.ts';

/*
 * count_tokens' CountingBudget (src/metered/counting-budget.ts) admits two maximal bodies per wallet and
 * eight large ones on the instance, and always admits a body of at most 64 KiB: without that, any
 * body, however small, was refused once the instance's eight were taken.
 * A key costs one SIWE signature from a fresh address with an empty wallet, so four free keys
 * holding two maximal bodies each deny count_tokens to every other client for as long as their
 * counts run (seconds each), and again when they resend. A 1 MiB body limit here keeps the test
 * light; the budget is in proportion to it.
 */
const LIMIT = 1024 * 1024;
const NATIVE = 'anth/claude-test';

const maximalBody = () => maximalCountBody(NATIVE, LIMIT);

describe("attack: count_tokens' instance budget held by a few free keys", () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE], limits: { countTokensBodyBytes: LIMIT } });
  });
  after(() => h.stop());

  const count = (key: string, body: string) =>
    fetch(`${h.gw.url}/v1/messages/count_tokens`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body });

  test("four fresh keys with two maximal bodies each in flight: another client's one-line count is still answered", async () => {
    const attackers = await Promise.all(Array.from({ length: 4 }, async () => (await h.wallet(0)).key));
    const victim = (await h.wallet(0)).key;
    assert.equal((await count(victim, JSON.stringify({ model: NATIVE, messages: [{ role: 'user', content: 'warm up' }] }))).status, 200);
    const body = maximalBody();
    const flood = Promise.all(attackers.flatMap((key) => [count(key, body), count(key, body)]).map(async (r) => (await r).status));
    // Every attacking body admitted and being counted in the lane.
    // (parsed first, one lane turn each, then counted for seconds: still eight once the parses are done).
    await until(() => laneLength() >= 8, 'eight bodies in the lane', 30_000);
    await new Promise((r) => setTimeout(r, 300));
    const inLane = laneLength();
    const res = await count(victim, JSON.stringify({ model: NATIVE, messages: [{ role: 'user', content: 'how many tokens is this?' }] }));
    const answer = await res.text();
    const statuses = await flood;
    console.log(`attackers: ${statuses.join(',')}; lane ${inLane}; victim: ${res.status} ${answer.slice(0, 200)}`);
    assert.deepEqual(statuses, Array(8).fill(200));
    assert.ok(inLane >= 8, `${inLane} counts in the lane when the victim asked`);
    assert.equal(res.status, 200, answer);
  });
});
