import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { sseBlocks } from '../support/sse.ts';

const FUNDS = 1_000_000;
const ANTHROPIC_USAGE = { input_tokens: 70, output_tokens: 50, cache_creation_input_tokens: 10, cache_read_input_tokens: 20 };
const OPENAI_USAGE = { prompt_tokens: 100, completion_tokens: 50 };
/** Both usages bill the same 100 prompt and 50 output tokens; Anthropic's 10 cache writes at 1.25× the prompt price. */
const CHARGE = 243; // 90 × 1.2 + 10 cache writes × 1.5 + 50 × 2.4
const OPENAI_CHARGE = 240; // 100 × 1.2 + 50 × 2.4

const UPSTREAMS = [
  { name: 'native', model: 'anth/claude-test', fake: (h: AnthropicHarness) => h.anthropic, charge: CHARGE },
  { name: 'translated', model: 'fake/chat-small', fake: (h: AnthropicHarness) => h.fake, charge: OPENAI_CHARGE },
] as const;

/** The Anthropic events of a raw SSE body, parsed, in order. */
function events(text: string): { event: string; data: any }[] {
  return sseBlocks(text).map((block) => {
    const [eventLine, dataLine] = block.split('\n');
    return { event: eventLine!.slice('event: '.length), data: JSON.parse(dataLine!.slice('data: '.length)) };
  });
}

/**
 * POST /v1/messages under the chat failure matrix (provider 4xx/5xx, timeouts, cut streams,
 * mid-stream errors, client disconnects, no usage) over both provider kinds on both engines, with
 * the ledger invariants checked after every test; and the stream's wire format byte for byte.
 */
for (const engine of ENGINES) {
  describe(`/v1/messages failures (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(engine, { chat: { firstByteTimeoutSeconds: 1, idleTimeoutSeconds: 2, drainTimeoutSeconds: 2 } });
    });
    beforeEach(() => resetProviders(h, { usage: ANTHROPIC_USAGE }, { usage: OPENAI_USAGE }));
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const post = (key: string, body: Record<string, unknown>, signal?: AbortSignal) =>
      fetch(`${h.gw.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ max_tokens: 300, messages: [{ role: 'user', content: 'hi' }], ...body }),
        signal,
      });

    const usageRows = (keyId: number) => h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', keyId).execute();
    async function waitForRow(keyId: number) {
      for (let i = 0; i < 200; i++) {
        const rows = await usageRows(keyId);
        if (rows.length && rows[0]!.status !== 'pending') return rows[0]!;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('no usage row');
    }
    async function expectNothingCharged(w: { account: any; keyId: number }) {
      assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
      const row = await waitForRow(w.keyId);
      assert.equal(row.status, 'upstream_error');
      assert.equal(Number(row.charged_usdc), 0);
    }

    for (const up of UPSTREAMS) {
      for (const status of [400, 500, 529]) {
        test(`${up.name}: provider ${status} is a 502 in Anthropic's shape, nothing charged`, async () => {
          const w = await h.wallet(FUNDS);
          up.fake(h).behaviour = { failStatus: status };
          const res = await post(w.key, { model: up.model });
          assert.equal(res.status, 502);
          const body = await res.json();
          assert.equal(body.type, 'error');
          assert.equal(body.error.type, 'api_error');
          assert.match(body.error.message, /nothing was charged/);
          await expectNothingCharged(w);
        });
      }

      test(`${up.name}: provider 500 on a stream is Anthropic's error event, nothing charged`, async () => {
        const w = await h.wallet(FUNDS);
        up.fake(h).behaviour = { failStatus: 500 };
        const res = await post(w.key, { model: up.model, stream: true });
        assert.equal(res.status, 200);
        const last = events(await res.text()).at(-1)!;
        assert.equal(last.event, 'error');
        assert.equal(last.data.error.type, 'api_error');
        assert.match(last.data.error.message, /provider answered 500.*nothing was charged/);
        await expectNothingCharged(w);
      });

      test(`${up.name}: a provider that never answers times out, nothing charged`, async () => {
        const w = await h.wallet(FUNDS);
        up.fake(h).behaviour = { hang: true };
        const res = await post(w.key, { model: up.model });
        assert.equal(res.status, 502);
        assert.equal((await res.json()).type, 'error');
        await expectNothingCharged(w);
      });

      test(`${up.name}: a stream cut by the provider ends with an error event, nothing charged`, async () => {
        const w = await h.wallet(FUNDS);
        up.fake(h).behaviour = { ...up.fake(h).behaviour, cutAfterChunks: 2 };
        const res = await post(w.key, { model: up.model, stream: true });
        const all = events(await res.text());
        assert.equal(all.at(-1)!.event, 'error');
        assert.ok(
          all.some((e) => e.event === 'content_block_delta'),
          'what came before the cut was relayed',
        );
        await expectNothingCharged(w);
      });

      test(`${up.name}: a client that leaves mid-stream is drained and billed`, async () => {
        const w = await h.wallet(FUNDS);
        up.fake(h).behaviour = { ...up.fake(h).behaviour, chunkDelayMs: 20 };
        const abort = new AbortController();
        const res = await post(w.key, { model: up.model, stream: true }, abort.signal);
        await res.body!.getReader().read();
        abort.abort();
        const row = await waitForRow(w.keyId);
        assert.equal(row.status, 'client_disconnected');
        assert.equal(Number(row.charged_usdc), up.charge);
        assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - up.charge);
      });

      for (const stream of [false, true]) {
        test(`${up.name}${stream ? ' stream' : ''}: a provider that reports no usage is billed an estimate within the reservation`, async () => {
          const w = await h.wallet(FUNDS);
          up.fake(h).behaviour = { omitUsage: true };
          const res = await post(w.key, { model: up.model, stream });
          assert.equal(res.status, 200);
          await res.text();
          const row = await waitForRow(w.keyId);
          assert.equal(row.status, 'ok');
          assert.equal(Number(row.estimated), 1);
          assert.ok(Number(row.charged_usdc) > 0, 'an answer was delivered, so it is not free');
          assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - Number(row.charged_usdc));
        });
      }
    }

    for (const up of UPSTREAMS) {
      test(`${up.name}: a stream the balance cannot cover is a plain JSON 402 (billing_error) before any event`, async () => {
        const w = await h.wallet(10);
        const res = await post(w.key, { model: up.model, stream: true });
        assert.equal(res.status, 402);
        assert.match(res.headers.get('content-type')!, /^application\/json/);
        const body = await res.json();
        assert.deepEqual([body.type, body.error.type, body.error.code, body.error.balance_usdc], ['error', 'billing_error', 'INSUFFICIENT_BALANCE', 10]);
        assert.equal(h.anthropic.received.length + h.fake.received.length, 0);
      });
    }

    test('native: an overloaded_error mid-stream becomes the error event, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { usage: ANTHROPIC_USAGE, overloadAfterChunks: 2 };
      const all = events(await (await post(w.key, { model: 'anth/claude-test', stream: true })).text());
      assert.equal(all.at(-1)!.event, 'error');
      assert.match(all.at(-1)!.data.error.message, /overloaded_error.*nothing was charged/);
      await expectNothingCharged(w);
    });

    test("native: the provider's events are relayed byte for byte (spacing kept) but message_delta, which waits for the bill and carries its charge, then message_stop", async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { usage: ANTHROPIC_USAGE, spacedJson: true };
      const text = await (await post(w.key, { model: 'anth/claude-test', stream: true })).text();
      // Before them, the SSE comment naming the deployment (the headers left before it answered), which SDKs skip.
      const opening = ': x-tollgate-deployment anth/claude-upstream\n\nevent: message_start\ndata: { "type": "message_start", "message": { "id": "msg_fake';
      assert.ok(text.startsWith(opening), text.slice(0, 160));
      assert.ok(text.includes('event: ping\ndata: { "type": "ping" }\n\n'));
      // The provider's message_delta, written again (compact) with the charge in its usage, just before message_stop.
      const delta = text.slice(text.indexOf('event: message_delta\n'));
      assert.ok(
        delta.startsWith(
          'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":70,',
        ),
        delta,
      );
      assert.ok(delta.includes(`"output_tokens":50,"cost":${CHARGE / 1_000_000},"charged_usdc":${CHARGE}}}\n\nevent: message_stop\n`), delta);
      assert.ok(text.endsWith('event: message_stop\ndata: {"type":"message_stop"}\n\n'));
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
    });

    test("translated: the stream is Anthropic's event sequence, usage in message_delta as billed", async () => {
      const w = await h.wallet(FUNDS);
      const all = events(await (await post(w.key, { model: 'fake/chat-small', stream: true })).text());
      assert.deepEqual(
        [...new Set(all.map((e) => e.event))],
        ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
      );
      assert.deepEqual(all[1]!.data, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
      const delta = all.find((e) => e.event === 'message_delta')!.data;
      assert.deepEqual(delta, {
        type: 'message_delta',
        delta: { stop_reason: 'end_turn', stop_sequence: null },
        usage: {
          input_tokens: 100,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: 0,
          output_tokens: 50,
          cost: OPENAI_CHARGE / 1_000_000,
          charged_usdc: OPENAI_CHARGE,
        },
      });
    });
  });
}
