import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { usageRowsOf } from '../support/usage-rows.ts';

/**
 * The failure matrix of chat holds on every inbound protocol × upstream pair. Each case
 * runs for /v1/chat/completions, /v1/responses and /v1/messages against an OpenAI-compatible and an
 * Anthropic provider: a provider error, a provider that never answers, a stream cut by the provider
 * (nothing charged for any of them), a provider that reports no usage (billed an estimate), and a
 * client that disconnects mid-stream (drained and billed the provider's usage). The per-protocol
 * files go deeper on each pair; this one proves none of the six pairs was left out. Failures do
 * not depend on the storage engine, so it runs on SQLite only.
 */
const FUNDS = 5_000_000;
const CONTENT = 'one two three four five six seven eight nine ten eleven twelve';

const PROTOCOLS = {
  chat: (model: string, stream: boolean) => ({
    path: '/v1/chat/completions',
    body: { model, stream, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] },
  }),
  responses: (model: string, stream: boolean) => ({ path: '/v1/responses', body: { model, stream, max_output_tokens: 50, input: 'hi' } }),
  messages: (model: string, stream: boolean) => ({
    path: '/v1/messages',
    body: { model, stream, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] },
  }),
};

type Behaviour = Record<string, unknown>;

describe('every protocol × upstream pair keeps the failure matrix (sqlite)', () => {
  let h: AnthropicHarness;
  before(async () => {
    // A short first-byte timeout so the hanging provider case ends quickly.
    h = await startAnthropicHarness('sqlite', { chat: { firstByteTimeoutSeconds: 1 } });
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  const upstreams = [
    { name: 'openai-compatible', model: 'fake/chat-small', set: (b: Behaviour) => resetProviders(h, {}, b) },
    { name: 'anthropic', model: 'anth/claude-test', set: (b: Behaviour) => resetProviders(h, b, {}) },
  ];

  const send = (key: string, protocol: keyof typeof PROTOCOLS, model: string, stream: boolean, signal?: AbortSignal) => {
    const { path, body } = PROTOCOLS[protocol](model, stream);
    return fetch(`${h.gw.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
      signal,
    });
  };
  const rowsOf = async (keyId: number, n = 1) => {
    let rows = await usageRowsOf(h, keyId);
    for (let i = 0; rows.length < n && i < 400; i++) {
      await new Promise((r) => setTimeout(r, 25));
      rows = await usageRowsOf(h, keyId);
    }
    return rows;
  };
  const nothingCharged = async (w: Awaited<ReturnType<AnthropicHarness['wallet']>>) => {
    const rows = await rowsOf(w.keyId);
    assert.equal(rows.length, 1);
    assert.equal(Number(rows[0]!.charged_usdc), 0);
    assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
  };

  for (const upstream of upstreams) {
    for (const protocol of Object.keys(PROTOCOLS) as (keyof typeof PROTOCOLS)[]) {
      const pair = `${protocol} → ${upstream.name}`;

      test(`${pair}: a provider 500 is never charged, JSON or streamed`, async () => {
        for (const stream of [false, true]) {
          upstream.set({ failStatus: 500 });
          const w = await h.wallet(FUNDS);
          const res = await send(w.key, protocol, upstream.model, stream);
          await res.text();
          if (!stream) assert.equal(res.status, 502);
          await nothingCharged(w);
        }
      });

      test(`${pair}: a provider that never answers times out, nothing charged`, async () => {
        upstream.set({ hang: true });
        const w = await h.wallet(FUNDS);
        const res = await send(w.key, protocol, upstream.model, false);
        await res.text();
        assert.equal(res.status, 502);
        await nothingCharged(w);
      });

      test(`${pair}: a stream the provider cuts is never charged`, async () => {
        upstream.set({ content: CONTENT, cutAfterChunks: 2 });
        const w = await h.wallet(FUNDS);
        const res = await send(w.key, protocol, upstream.model, true);
        await res.text().catch(() => '');
        await nothingCharged(w);
      });

      test(`${pair}: a provider that reports no usage is billed an estimate`, async () => {
        upstream.set({ content: CONTENT, omitUsage: true });
        const w = await h.wallet(FUNDS);
        const res = await send(w.key, protocol, upstream.model, false);
        assert.equal(res.status, 200, await res.text());
        const [row] = await rowsOf(w.keyId);
        assert.ok(Number(row!.charged_usdc) > 0);
        assert.equal(Boolean(Number(row!.estimated)), true);
        assert.equal((await h.balance(w.account)).locked_usdc, 0);
      });

      test(`${pair}: a client that disconnects mid-stream is drained and billed`, async () => {
        upstream.set({ content: CONTENT, chunkDelayMs: 30 });
        const w = await h.wallet(FUNDS);
        const abort = new AbortController();
        const res = await send(w.key, protocol, upstream.model, true, abort.signal);
        const reader = res.body!.getReader();
        await reader.read(); // the first bytes, then the client goes away
        abort.abort();
        await reader.cancel().catch(() => undefined);
        const [row] = await rowsOf(w.keyId);
        assert.ok(Number(row!.charged_usdc) > 0, `billed: ${JSON.stringify(row)}`);
        for (let i = 0; (await h.balance(w.account)).locked_usdc !== 0 && i < 200; i++) await new Promise((r) => setTimeout(r, 25));
        const balance = await h.balance(w.account);
        assert.equal(balance.locked_usdc, 0);
        assert.equal(balance.balance_usdc, FUNDS - Number(row!.charged_usdc));
        await h.gw.assertLedger();
      });
    }
  }
});
