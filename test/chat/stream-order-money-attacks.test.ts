import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { ENGINES } from '../support/engines.ts';
import { expectNothingCharged, usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';
import { postChat, routingSuite, type RoutingHarness } from '../support/routing-harness.ts';
import { readServed, streamedDeployment } from '../support/sse.ts';
import { until } from '../support/until.ts';

/*
 * Streams in the spec's order (src/metered/stream.ts): the 200 and the headers leave before any
 * deployment is called, so no HTTP status can say "not paid" or "failed" afterwards. These attack
 * where that meets money: a deployment failing after bytes went out, two streams on one small
 * wallet, a client leaving while the chain still tries deployments. The ledger is checked after
 * each (routingSuite).
 */
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const FUNDS = 1_000_000;
const HI = [{ role: 'user' as const, content: 'hi' }];
const streamBody = (extra: Record<string, unknown> = {}) => ({
  model: 'fake/routed',
  messages: HI,
  stream: true,
  stream_options: { include_usage: true },
  ...extra,
});

for (const engine of ENGINES) {
  describe(`attack: stream order x money (${engine})`, () => {
    const harness = routingSuite(engine, USAGE, { chat: { firstByteTimeoutSeconds: 5 } });
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    test('the serving deployment resets mid-answer: no fallback is called after bytes went out, the error event ends it, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, cutAfterChunks: 3 };
      const res = await postChat(h, w.key, streamBody());
      assert.equal(res.status, 200);
      const { deployment, events } = await readServed(res);
      assert.equal(deployment, 'fake/routed');
      assert.ok(
        events.some((e) => e !== '[DONE]' && JSON.parse(e).choices?.[0]?.delta?.content),
        'part of the answer reached the client',
      );
      assert.equal(JSON.parse(events.at(-2)!).error.type, 'upstream_error');
      assert.equal(events.at(-1), '[DONE]');
      assert.equal(h.backup.received.length, 0, 'a fallback after bytes went out would splice two answers');
      await expectNothingCharged(h, w, FUNDS);
    });

    test('two streams at once on a wallet that covers one reservation: the second is a 402 status, not a 200 with an error event; one charge', async () => {
      // One request's reservation: ~100 prompt tokens at 1.2 and max_tokens 4096 at 2.4 micro-USDC.
      const funds = 12_000;
      const w = await h.wallet(funds);
      h.fake.behaviour = { usage: USAGE, delayMs: 500 };
      const [a, b] = await Promise.all([postChat(h, w.key, streamBody({ max_tokens: 4096 })), postChat(h, w.key, streamBody({ max_tokens: 4096 }))]);
      const statuses = [a.status, b.status].sort();
      const texts = await Promise.all([a.text(), b.text()]);
      assert.deepEqual(statuses, [200, 402], texts.join('\n'));
      const served = [a, b].findIndex((r) => r.status === 200);
      assert.equal(streamedDeployment(texts[served]!), 'fake/routed');
      assert.match(texts[1 - served]!, /INSUFFICIENT_BALANCE|insufficient/i);
      const row = await waitForUsageRow(h, w.keyId);
      assert.equal((await usageRowsOf(h, w.keyId)).length, 1);
      assert.equal(row.status, 'ok');
      const left = funds - Number(row.charged_usdc);
      assert.deepEqual(await h.balance(w.account), { balance_usdc: left, locked_usdc: 0, available_usdc: left });
    });

    test('the client leaves while the primary is still failing: no fallback is called (nobody would read it), nothing charged, nothing locked', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { delayMs: 600, failStatus: 503 };
      const abort = new AbortController();
      const res = await postChat(h, w.key, streamBody(), abort.signal);
      assert.equal(res.status, 200);
      await until(() => h.fake.received.length === 1, 'the primary called');
      abort.abort();
      await until(async () => (await usageRowsOf(h, w.keyId)).length === 1, 'the request closed', 10_000);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(h.backup.received.length, 0, 'nobody is left to read what a fallback would produce');
      await expectNothingCharged(h, w, FUNDS, 'client_disconnected');
    });

    test('a client that reads nothing while the chain waits is not cut for it: the late answer arrives in full, billed once', async () => {
      // The idle timeout counts only while bytes wait for the client (a client that stops reading
      // an answer: test/chat/stalled-client.test.ts); the chain wait sends nothing after the headers.
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, delayMs: 1500 };
      const res = await postChat(h, w.key, streamBody());
      await new Promise((r) => setTimeout(r, 1800));
      const { deployment, events } = await readServed(res);
      assert.equal(deployment, 'fake/routed');
      assert.equal(events.at(-1), '[DONE]');
      const row = await waitForUsageRow(h, w.keyId);
      assert.equal(row.status, 'ok');
    });
  });
}

for (const engine of ENGINES) {
  describe(`attack: a client leaves while the only deployment hangs before answering (${engine})`, () => {
    // The drain of a client that left is bounded by chat.drainTimeoutSeconds, whether the provider
    // answered yet or not; the chain's own first-byte wait here is longer than that bound.
    const harness = routingSuite(engine, USAGE, { chat: { firstByteTimeoutSeconds: 30, drainTimeoutSeconds: 1 } });
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    test('the drain ends at the drain timeout, not the first-byte timeout: no fallback, nothing charged, nothing locked', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { hang: true };
      const abort = new AbortController();
      const res = await postChat(h, w.key, streamBody(), abort.signal);
      assert.equal(res.status, 200);
      await until(() => h.fake.received.length === 1, 'the primary called');
      const left = performance.now();
      abort.abort();
      await until(async () => (await usageRowsOf(h, w.keyId)).length === 1, 'the request closed', 15_000);
      const ms = performance.now() - left;
      assert.ok(ms < 10_000, `the drain held the reservation ${Math.round(ms)} ms after the client left (drain timeout 1 s, first-byte 30 s)`);
      assert.equal(h.backup.received.length, 0);
      await expectNothingCharged(h, w, FUNDS, 'client_disconnected');
    });
  });
}
