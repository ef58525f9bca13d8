import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ENGINES } from '../support/engines.ts';
import { readSse } from '../support/chat-harness.ts';
import { readServed } from '../support/sse.ts';
import { call } from '../support/gateway.ts';
import { expectNothingCharged, usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';
import { postChat, resetRouting, routingSuite, startRoutingHarness, type RoutingHarness } from '../support/routing-harness.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
/** 100 × 1.2 + 50 × 2.4: the listed price, whichever deployment serves. */
const CHARGE = 240;
/** What each deployment costs us for USAGE: the primary at 1 and 2, the backup at 0.5 and 1. */
const PRIMARY_COST = 200;
const BACKUP_COST = 100;
const MESSAGES = [{ role: 'user', content: 'hi' }];

for (const engine of ENGINES) {
  describe(`routing over deployments (${engine})`, () => {
    const harness = routingSuite(engine, USAGE);
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    const post = (key: string, body: Record<string, unknown>, signal?: AbortSignal) => postChat(h, key, body, signal);

    /**
     * The failure every deployment ended with: a JSON request's 502, or (the spec, 4.7 rules 3-4) a
     * stream's 200 whose last events are the error event and [DONE]. Returns its message.
     */
    async function failureOf(res: Response, stream: boolean): Promise<string> {
      if (!stream) {
        assert.equal(res.status, 502);
        assert.match(res.headers.get('content-type') ?? '', /application\/json/);
        const body = await res.json();
        assert.equal(body.error, 'UPSTREAM_ERROR');
        return body.message;
      }
      assert.equal(res.status, 200);
      const { deployment, events } = await readServed(res);
      assert.equal(deployment, null, 'no deployment served');
      assert.equal(events.at(-1), '[DONE]');
      const error = JSON.parse(events.at(-2)!).error;
      assert.equal(error.type, 'upstream_error');
      return error.message;
    }

    async function expectServedByBackup(w: { account: any; keyId: number }, deployment = 'backup/routed-backup', cost = BACKUP_COST) {
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE, 'the listed price, once');
      const rows = await usageRowsOf(h, w.keyId);
      assert.equal(rows.length, 1);
      assert.deepEqual(
        [rows[0]!.status, Number(rows[0]!.charged_usdc), Number(rows[0]!.provider_cost_usdc), rows[0]!.deployment],
        ['ok', CHARGE, cost, deployment],
      );
    }

    for (const stream of [false, true]) {
      const mode = stream ? 'stream' : 'JSON';
      for (const failStatus of [500, 502, 503, 429]) {
        test(`${mode}: the primary answers ${failStatus}: the fallback serves, billed once at the listed price, its own cost booked`, async () => {
          const w = await h.wallet(FUNDS);
          h.fake.behaviour = { failStatus };
          const res = await post(w.key, { model: 'fake/routed', messages: MESSAGES, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) });
          assert.equal(res.status, 200);
          const served = await readServed(res);
          assert.equal(served.deployment, 'backup/routed-backup');
          if (stream) assert.equal(served.events.at(-1), '[DONE]');
          else assert.equal(JSON.parse(served.text).usage.prompt_tokens, 100);
          assert.equal(h.fake.received.length, 1, 'the primary was tried once (chat.retries 0)');
          assert.equal(h.backup.received.length, 1);
          assert.equal(h.backup.received[0]!.body.model, 'routed-backup', "the fallback's own model name");
          if (stream) await waitForUsageRow(h, w.keyId);
          await expectServedByBackup(w);
        });
      }

      test(`${mode}: the primary refuses connections (a closed port): the fallback serves`, async () => {
        const w = await h.wallet(FUNDS);
        const res = await post(w.key, { model: 'dead/refused', messages: MESSAGES, stream });
        assert.equal(res.status, 200);
        assert.equal((await readServed(res)).deployment, 'backup/refused-backup');
        if (stream) await waitForUsageRow(h, w.keyId);
        await expectServedByBackup(w, 'backup/refused-backup');
      });

      test(`${mode}: the primary times out before its first byte: the fallback serves, and the primary is ${stream ? 'counted toward its cooldown' : 'not counted toward a cooldown (a whole answer may still be generating)'}`, async () => {
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { usage: USAGE, delayMs: 2500 };
        const failuresBefore = h.gw.services.chat.routing.cooldown.recentFailures('fake/routed');
        const res = await post(w.key, { model: 'fake/routed', messages: MESSAGES, stream });
        assert.equal(res.status, 200);
        assert.equal((await readServed(res)).deployment, 'backup/routed-backup');
        if (stream) await waitForUsageRow(h, w.keyId);
        await expectServedByBackup(w);
        assert.equal(h.fake.received.length, 1, 'the timed-out primary was not asked again (no retry on the same deployment)');
        assert.equal(h.gw.services.chat.routing.cooldown.recentFailures('fake/routed') - failuresBefore, stream ? 1 : 0);
      });

      const failed = stream ? "200, the spec's error event and [DONE]" : '502 JSON';
      test(`${mode}: every deployment fails: ${failed}, nothing charged, each tried exactly once`, async () => {
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { failStatus: 503 };
        h.backup.behaviour = { failStatus: 502 };
        const res = await post(w.key, { model: 'fake/routed', messages: MESSAGES, stream });
        const message = await failureOf(res, stream);
        assert.match(message, /^every deployment of fake\/routed failed \(2 attempts\); the last: the provider answered 502.*; nothing was charged$/);
        assert.deepEqual([h.fake.received.length, h.backup.received.length], [1, 1]);
        await expectNothingCharged(h, w, FUNDS);
      });

      test(`${mode}: a 400 from the primary is the request's fault: not retried on the fallback`, async () => {
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { failStatus: 400 };
        const res = await post(w.key, { model: 'fake/routed', messages: MESSAGES, stream });
        if (!stream) assert.equal(res.headers.get('x-should-retry'), 'false');
        assert.match(await failureOf(res, stream), /^the provider answered 400: injected failure 400/);
        assert.equal(h.backup.received.length, 0);
        await expectNothingCharged(h, w, FUNDS);
      });
    }

    test('stream: cut by the fallback after bytes reached the client: not retried, error event, nothing charged as today', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 503 };
      h.backup.behaviour = { usage: USAGE, cutAfterChunks: 2 };
      const res = await post(w.key, { model: 'fake/routed', messages: MESSAGES, stream: true });
      assert.equal(res.status, 200);
      const events = await readSse(res);
      assert.equal(JSON.parse(events.at(-2)!).error.type, 'upstream_error');
      assert.equal(h.backup.received.length, 1, 'a stream that started is never sent elsewhere');
      assert.equal(h.fake.received.length, 1);
      await expectNothingCharged(h, w, FUNDS);
    });

    test("429 with Retry-After and chat.retries 1: the primary is retried after the provider's delay, then serves", async () => {
      const retrying = await startRoutingHarness(engine, { chat: { retries: 1, maxRetryAfterSeconds: 2 } });
      try {
        resetRouting(retrying, { usage: USAGE });
        const w = await retrying.wallet(FUNDS);
        let calls = 0;
        // The first call is refused with Retry-After: 1, the retry answers.
        retrying.fake.behaviour = { failStatus: 429, retryAfter: '1' };
        const timer = setInterval(() => {
          if (retrying.fake.received.length > calls) {
            calls = retrying.fake.received.length;
            retrying.fake.behaviour = { usage: USAGE };
          }
        }, 5);
        const started = performance.now();
        const res = await postChat(retrying, w.key, { model: 'fake/routed', messages: MESSAGES });
        clearInterval(timer);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('x-tollgate-deployment'), 'fake/routed');
        assert.ok(performance.now() - started >= 950, 'waited for Retry-After');
        assert.deepEqual([retrying.fake.received.length, retrying.backup.received.length], [2, 0]);
        await res.text();
        assert.equal((await retrying.balance(w.account)).balance_usdc, FUNDS - CHARGE);
        await retrying.gw.assertLedger();
      } finally {
        await retrying.stop();
      }
    });

    test('cross-type: an OpenAI-compatible model falls back on an Anthropic deployment, translated', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 503 };
      h.anthropic.behaviour = { usage: { input_tokens: 100, output_tokens: 50 } };
      const res = await post(w.key, { model: 'fake/to-claude', messages: MESSAGES });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-deployment'), 'anth/claude-fallback');
      const body = await res.json();
      assert.equal(body.object, 'chat.completion', 'answered in the client protocol');
      assert.equal(h.anthropic.received[0]!.body.model, 'claude-fallback');
      assert.ok(Array.isArray(h.anthropic.received[0]!.body.messages) && h.anthropic.received[0]!.body.max_tokens > 0, 'an Anthropic Messages request');
      await expectServedByBackup(w, 'anth/claude-fallback');
    });

    test('cross-type: an Anthropic model falls back on an OpenAI-compatible deployment (529 overloaded), translated', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { failStatus: 529 };
      const res = await post(w.key, { model: 'anth/claude-routed', messages: MESSAGES, stream: true, stream_options: { include_usage: true } });
      assert.equal(res.status, 200);
      const { deployment, events } = await readServed(res);
      assert.equal(deployment, 'fake/gpt-fallback');
      assert.equal(JSON.parse(events[0]!).object, 'chat.completion.chunk', "the fallback's own stream, decoded and re-encoded");
      assert.equal(events.at(-1), '[DONE]');
      assert.equal(h.fake.received[0]!.body.model, 'gpt-fallback');
      await waitForUsageRow(h, w.keyId);
      await expectServedByBackup(w, 'fake/gpt-fallback');
    });

    test('a native Messages request skips the OpenAI-compatible fallback (it cannot take untranslated bytes): 502, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { failStatus: 529 };
      const client = new Anthropic({ baseURL: h.gw.url, apiKey: w.key, maxRetries: 0 });
      await assert.rejects(
        client.messages.create({ model: 'anth/claude-routed', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
        (err: any) => err.status === 502,
      );
      assert.equal(h.fake.received.length, 0);
      await expectNothingCharged(h, w, FUNDS);
    });

    test('the Anthropic SDK on a translated model: Messages requests fall back too', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 502 };
      h.anthropic.behaviour = { usage: { input_tokens: 100, output_tokens: 50 } };
      const client = new Anthropic({ baseURL: h.gw.url, apiKey: w.key, maxRetries: 0 });
      const msg = await client.messages.create({ model: 'fake/to-claude', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(msg.type, 'message');
      await expectServedByBackup(w, 'anth/claude-fallback');
    });

    test("revenue per deployment: the usage totals book each deployment's own cost", async () => {
      const w = await h.wallet(FUNDS);
      const ask = async () => (await post(w.key, { model: 'fake/routed', messages: MESSAGES })).text();
      await ask(); // the primary
      h.fake.behaviour = { failStatus: 500 };
      await ask(); // the backup
      const res = await call(h.gw.url, 'GET', `/v1/usage/${w.account.address}`, undefined, { authorization: `Bearer ${w.key}` });
      assert.equal(res.status, 200);
      const key = res.body.keys.find((k: any) => k.api_key_id === w.keyId);
      assert.equal(key.total_charged_usdc, 2 * CHARGE);
      assert.equal(key.total_platform_revenue_usd, (2 * CHARGE - PRIMARY_COST - BACKUP_COST) / 1_000_000);
      const rows = await usageRowsOf(h, w.keyId);
      assert.deepEqual(
        rows.map((r) => [r.deployment, Number(r.provider_cost_usdc)]),
        [
          ['fake/routed', PRIMARY_COST],
          ['backup/routed-backup', BACKUP_COST],
        ],
      );
    });

    test('one warn line per failed attempt: deployment, status or error code, request id, what came next; never a key', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 503 };
      h.backup.behaviour = { failStatus: 429 };
      const res = await post(w.key, { model: 'fake/routed', messages: MESSAGES });
      assert.equal(res.status, 502);
      const requestId = res.headers.get('x-request-id');
      const lines = h.gw
        .logs()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .filter((l) => l.requestId === requestId && String(l.msg).startsWith('provider call failed'));
      assert.deepEqual(
        lines.map((l) => [l.level, l.deployment, l.provider, l.status, l.then]),
        [
          [40, 'fake/routed', 'fake', 503, 'retry'],
          [40, 'backup/routed-backup', 'backup', 429, 'retry'],
        ],
      );
      assert.ok(!h.gw.logs().includes('sk-fake-provider-key'), 'the provider key never reaches the log');
      await expectNothingCharged(h, w, FUNDS);
    });

    test('metrics count attempts, failures and fallbacks per deployment', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 503 };
      await (await post(w.key, { model: 'fake/routed', messages: MESSAGES })).text();
      const text = await h.gw.services.metrics.registry.metrics();
      assert.match(text, /tollgate_deployment_attempts_total\{deployment="backup\/routed-backup"\} [1-9]/);
      assert.match(text, /tollgate_deployment_failures_total\{deployment="fake\/routed",reason="503"\} [1-9]/);
      assert.match(text, /tollgate_deployment_fallbacks_total\{from="fake\/routed",to="backup\/routed-backup"\} [1-9]/);
    });
  });
}
