import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CLAUDE, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { laneLength } from '../../src/cpu-lane.ts';
import { until } from '../support/until.ts';
import { maximalCountBody } from '../support/maximal-count-body.ts';

/*
 * A count_tokens refused by the counting budget (src/metered/counting-budget.ts) was refused after
 * the wallet's chat window had counted it (on the headers), so it used up one of the wallet's chat
 * requests for nothing. The instance's bound is held by other wallets' large bodies, and Claude
 * Code retries a refused count every second (Retry-After: 1): another tenant's counts burned a
 * wallet's chat window. A count the budget would refuse is now refused on its headers, before the
 * window counts it or its body is read.
 */
const LIMIT = 1024 * 1024;
const NATIVE = 'anth/claude-test';
const CHATS_PER_MINUTE = 3;

const maximalBody = () => maximalCountBody(NATIVE, LIMIT);

describe("attack: count_tokens refused by the instance's counting budget used up the wallet's chat window", () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', {
      models: [...MODELS, CLAUDE],
      limits: { countTokensBodyBytes: LIMIT },
      rateLimits: { chat: { perMinute: CHATS_PER_MINUTE } },
    });
  });
  after(() => h.stop());

  const count = (key: string, body: string) =>
    fetch(`${h.gw.url}/v1/messages/count_tokens`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body });
  const chat = (key: string) =>
    fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }),
    });

  test('three counts refused while other wallets hold the instance, then three chats: all three chats are served', async () => {
    const others = await Promise.all(Array.from({ length: 4 }, async () => (await h.wallet(0)).key));
    const victim = (await h.wallet(1_000_000)).key;
    const body = maximalBody();
    const flood = Promise.all(others.flatMap((key) => [count(key, body), count(key, body)]).map(async (r) => (await r).status));
    await until(() => laneLength() >= 8, 'eight bodies in the lane', 30_000);
    await new Promise((r) => setTimeout(r, 300));

    // A large count (over the 64 KiB always admitted), as Claude Code sends for a long conversation.
    const large = JSON.stringify({ model: NATIVE, messages: [{ role: 'user', content: 'word '.repeat(30_000) }] });
    for (let i = 0; i < CHATS_PER_MINUTE; i++) {
      const res = await count(victim, large);
      const answer = await res.text();
      assert.equal(res.status, 429, answer);
      assert.match(answer, /the gateway is counting/, 'refused by the counting budget, not by the chat window');
      assert.equal(res.headers.get('retry-after'), '1');
    }
    assert.deepEqual(await flood, Array(8).fill(200));

    const chats = [];
    for (let i = 0; i < CHATS_PER_MINUTE; i++) {
      const res = await chat(victim);
      chats.push(`${res.status} ${(await res.text()).slice(0, 80)}`);
    }
    assert.deepEqual(
      chats.map((c) => c.slice(0, 3)),
      Array(CHATS_PER_MINUTE).fill('200'),
      `the wallet's ${CHATS_PER_MINUTE} chats a minute, after its refused counts: ${chats.join('; ')}`,
    );
    await h.gw.assertLedger();
  });
});
