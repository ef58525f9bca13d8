import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { planChat } from '../../src/metered/plan/plan.ts';
import { reservationFor } from '../../src/providers/pricing.ts';
import { ENGINES } from '../support/engines.ts';
import { readServed } from '../support/sse.ts';
import { call } from '../support/gateway.ts';
import { siweProof } from '../support/siwe.ts';
import { expectNothingCharged, usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';
import { postChat, resetRouting, routingSuite, type RoutingHarness } from '../support/routing-harness.ts';
import { until } from '../support/until.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240;
const MESSAGES = [{ role: 'user', content: 'hi' }];
const TOOLS = [
  { type: 'function', function: { name: 'lookup', description: 'looks a word up', parameters: { type: 'object', properties: { word: { type: 'string' } } } } },
];

for (const engine of ENGINES) {
  describe(`attack: deployments that fail or lie (${engine})`, () => {
    const harness = routingSuite(engine, USAGE);
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    const post = (key: string, body: Record<string, unknown>, signal?: AbortSignal) => postChat(h, key, body, signal);
    const capKey = async (w: { account: any; keyId: number }, limit: number) => {
      const res = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${w.keyId}`, { ...(await siweProof(w.account)), spend_limit_usdc: limit });
      assert.equal(res.status, 200, res.text);
    };

    test("a fallback whose bound is larger than the primary's (Anthropic's hidden tool prompt): the reservation holds it, checked with a key capped at exactly that reservation", async () => {
      const body = { model: 'fake/to-claude', messages: MESSAGES, tools: TOOLS, max_tokens: 200 };
      const plan = planChat(structuredClone(body), h.gw.services.catalog, h.gw.services.config);
      const [openai, anthropic] = plan.routes;
      assert.ok(anthropic!.promptUpperBound > openai!.promptUpperBound, 'the Anthropic encoding can bill more prompt tokens');
      assert.equal(plan.promptUpperBound, anthropic!.promptUpperBound);
      assert.equal(plan.reservationUsdc, reservationFor(plan.model, anthropic!.promptUpperBound, 200, 1));

      const w = await h.wallet(FUNDS);
      await capKey(w, plan.reservationUsdc);
      h.fake.behaviour = { failStatus: 503 };
      // The fallback bills the most it could: every prompt token of its bound and every output token.
      h.anthropic.behaviour = { usage: { input_tokens: anthropic!.promptUpperBound, output_tokens: 200 } };
      const res = await post(w.key, body);
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(res.headers.get('x-tollgate-deployment'), 'anth/claude-fallback');
      const charged = Number(res.headers.get('x-tollgate-charged-usdc'));
      assert.equal(charged, plan.reservationUsdc, 'the worst case of the fallback is exactly the reservation');
      assert.ok(charged > reservationFor(plan.model, openai!.promptUpperBound, 200, 1), "a reservation from the primary's bound alone would not have held it");
      await res.text();
    });

    test('a lying fallback reporting more usage than possible: a capped key is charged at most its reservation, and the excess is reported', async () => {
      const w = await h.wallet(FUNDS);
      await capKey(w, 500_000);
      h.fake.behaviour = { failStatus: 500 };
      h.backup.behaviour = { usage: { prompt_tokens: 50_000_000, completion_tokens: 50_000_000 } };
      const before = await h.gw.services.metrics.registry.getSingleMetricAsString('tollgate_charge_over_reservation_total');
      const plan = planChat({ model: 'fake/routed', messages: MESSAGES, max_tokens: 100 }, h.gw.services.catalog, h.gw.services.config);
      const res = await post(w.key, { model: 'fake/routed', messages: MESSAGES, max_tokens: 100 });
      assert.equal(res.status, 200);
      await res.text();
      assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), plan.reservationUsdc);
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - plan.reservationUsdc);
      const after = await h.gw.services.metrics.registry.getSingleMetricAsString('tollgate_charge_over_reservation_total');
      assert.notEqual(after, before, 'the over-report is counted for the operator');
    });

    test('a client that disconnects during the attempt chain: no further deployment is called, nothing charged', async () => {
      for (const stream of [false, true]) {
        resetRouting(h, { usage: USAGE });
        const w = await h.wallet(FUNDS);
        // The primary takes its whole first-byte timeout (1 s) to fail; the client leaves meanwhile.
        h.fake.behaviour = { usage: USAGE, delayMs: 2500 };
        const abort = new AbortController();
        const calls = h.fake.received.length;
        const pending = post(w.key, { model: 'fake/routed', messages: MESSAGES, stream }, abort.signal).catch((err) => err);
        // The client leaves once the primary has the request, well inside its 1 s first-byte timeout
        // (a fixed 300 ms could end after it on a loaded machine, or before the chain had started).
        await until(() => h.fake.received.length === calls + 1, 'the primary called');
        abort.abort();
        await pending;
        const row = await waitForUsageRow(h, w.keyId);
        assert.equal(Number(row.charged_usdc), 0);
        assert.equal(h.backup.received.length, 0, `${stream ? 'stream' : 'JSON'}: the chain ended with the client`);
        assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
      }
    });

    test('many concurrent requests while the primary flaps: every one served once, billed once, the ledger consistent', async () => {
      const w = await h.wallet(FUNDS);
      let flip = false;
      const flapping = setInterval(() => {
        flip = !flip;
        h.fake.behaviour = flip ? { failStatus: 503 } : { usage: USAGE };
      }, 3);
      try {
        const results = await Promise.all(
          Array.from({ length: 40 }, async (_, i) => {
            const stream = i % 2 === 0;
            const res = await post(w.key, { model: 'fake/routed', messages: MESSAGES, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) });
            const { deployment, text } = await readServed(res);
            return { status: res.status, deployment, done: !stream || text.includes('[DONE]') };
          }),
        );
        assert.deepEqual(
          results.filter((r) => r.status !== 200 || !r.done),
          [],
        );
      } finally {
        clearInterval(flapping);
      }
      await until(async () => (await usageRowsOf(h, w.keyId)).length >= 40, 'the streams settled', 30_000);
      const rows = await usageRowsOf(h, w.keyId);
      assert.equal(rows.length, 40);
      assert.ok(rows.every((r) => Number(r.charged_usdc) === CHARGE && r.status === 'ok'));
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 40 * CHARGE);
      // Each row names a deployment that was called for it; the backup served whenever the primary failed.
      const byBackup = rows.filter((r) => r.deployment === 'backup/routed-backup').length;
      assert.equal(byBackup + rows.filter((r) => r.deployment === 'fake/routed').length, 40);
      assert.equal(h.backup.received.length, byBackup, 'the backup was called only for the requests it served');
    });

    test('a deployment whose key is not configured is passed over for the next', async () => {
      const w = await h.wallet(FUNDS);
      const res = await post(w.key, { model: 'nokey/keyless', messages: MESSAGES });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-deployment'), 'backup/keyless-backup');
      await res.text();
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
    });

    test('every deployment failing never charges, whatever the protocol', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { failStatus: 529 };
      h.fake.behaviour = { failStatus: 503 };
      const res = await post(w.key, { model: 'anth/claude-routed', messages: MESSAGES, stream: true });
      assert.equal(res.status, 200, 'the stream started before any deployment was called (spec 4.7)');
      const { deployment, events } = await readServed(res);
      assert.equal(deployment, null);
      assert.equal(JSON.parse(events.at(-2)!).error.type, 'upstream_error');
      await expectNothingCharged(h, w, FUNDS);
    });
  });
}

describe('cooldown, recovery, /health and weights (sqlite)', () => {
  const harness = routingSuite('sqlite', USAGE, { chat: { cooldown: { failures: 2, windowSeconds: 60, seconds: 1 } } });
  let h: RoutingHarness;
  beforeEach(() => (h = harness()));

  /** The answer read whole, and the deployment it names (a JSON answer's header, a stream's comment). */
  const ask = async (key: string, model: string, stream = false) => readServed(await postChat(h, key, { model, messages: MESSAGES, stream }));

  test('two failures cool the primary down: it goes after the fallback, /health lists it and stays 200, and it serves again after the cooldown', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { failStatus: 503 };
    await ask(w.key, 'fake/routed');
    await ask(w.key, 'fake/routed');
    assert.equal(h.fake.received.length, 2);
    const skipped = await ask(w.key, 'fake/routed', true);
    assert.equal(skipped.deployment, 'backup/routed-backup');
    assert.equal(h.fake.received.length, 2, 'not called while cooling down and the fallback serves');

    const health = await call(h.gw.url, 'GET', '/health');
    assert.equal(health.status, 200);
    assert.equal(health.body.status, 'ok');
    assert.deepEqual(
      health.body.cooldowns.map((c: any) => c.deployment),
      ['fake/routed'],
    );
    assert.match(await h.gw.services.metrics.registry.metrics(), /tollgate_deployment_cooldowns_total\{deployment="fake\/routed"\} 1/);

    h.fake.behaviour = { usage: USAGE };
    await new Promise((r) => setTimeout(r, 1100));
    const recovered = await ask(w.key, 'fake/routed');
    assert.equal(recovered.deployment, 'fake/routed');
    assert.equal((await call(h.gw.url, 'GET', '/health')).body.cooldowns, undefined);
    // The stream's settle runs after its end: wait for all four rows, not the first.
    await until(async () => (await usageRowsOf(h, w.keyId)).length >= 4, 'the four requests settled');
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 4 * CHARGE);
  });

  test('weights 3 and 1 spread requests about three to one, each billed the listed price', async () => {
    const w = await h.wallet(FUNDS);
    const served: Record<string, number> = {};
    for (let i = 0; i < 60; i++) {
      const d = (await ask(w.key, 'fake/weighted')).deployment!;
      served[d] = (served[d] ?? 0) + 1;
    }
    const share = (served['fake/weighted'] ?? 0) / 60;
    assert.ok(share > 0.5 && share < 0.95, `the weight-3 deployment served ${share}`);
    assert.ok((served['backup/weighted-backup'] ?? 0) > 0);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 60 * CHARGE);
  });
});
