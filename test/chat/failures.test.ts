import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { countTokens } from 'gpt-tokenizer';
import { startChatHarness, readSse, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { siweProof } from '../support/siwe.ts';
import { until } from '../support/until.ts';

const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4
const FUNDS = 1_000_000;
const MESSAGES = [{ role: 'user', content: 'hi' }];

/**
 * The failure matrix: each case asserts the status the client sees and the exact charge, and the
 * ledger invariants hold after every one.
 */
describe('chat failure matrix', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { chat: { firstByteTimeoutSeconds: 1, idleTimeoutSeconds: 1, drainTimeoutSeconds: 5 } });
  });
  beforeEach(() => {
    h.fake.behaviour = { usage: USAGE };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  const post = (key: string, body: Record<string, unknown>) =>
    fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  async function usageRows(keyId: number) {
    return h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', keyId).execute();
  }

  async function expectUntouched(w: { account: any; keyId: number }, status: string) {
    assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
    const rows = await usageRows(w.keyId);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.status, status);
    assert.equal(Number(rows[0]!.charged_usdc), 0);
  }

  for (const status of [500, 502, 503, 429, 400]) {
    test(`upstream ${status}: 502 UPSTREAM_ERROR, nothing charged`, async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: status };
      const res = await post(w.key, { model: 'chat-small', messages: MESSAGES });
      assert.equal(res.status, 502);
      const body = await res.json();
      assert.equal(body.error, 'UPSTREAM_ERROR');
      assert.match(body.message, new RegExp(`provider answered ${status}: injected failure ${status}; nothing was charged`));
      await expectUntouched(w, 'upstream_error');
    });
  }

  test('upstream too slow to answer (first-byte timeout): 502, nothing charged', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { delayMs: 2500 };
    const res = await post(w.key, { model: 'chat-small', messages: MESSAGES });
    assert.equal(res.status, 502);
    assert.match((await res.json()).message, /timed out/);
    await expectUntouched(w, 'upstream_error');
  });

  test('upstream hangs: 502, nothing charged', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { hang: true };
    const res = await post(w.key, { model: 'chat-small', messages: MESSAGES });
    assert.equal(res.status, 502);
    await expectUntouched(w, 'upstream_error');
  });

  test('upstream unreachable: 502, nothing charged', async () => {
    const unreachable = await startChatHarness('sqlite', {
      providers: { fake: { baseUrl: 'http://127.0.0.1:9/v1' }, other: { baseUrl: 'http://127.0.0.1:9/v1' } },
    });
    try {
      const w = await unreachable.wallet(FUNDS);
      const res = await fetch(`${unreachable.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', messages: MESSAGES }),
      });
      assert.equal(res.status, 502);
      assert.match((await res.json()).message, /could not be reached/);
      assert.deepEqual(await unreachable.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
      await unreachable.gw.assertLedger();
    } finally {
      await unreachable.stop();
    }
  });

  test('stream: upstream fails before streaming: error event then [DONE], status 200, nothing charged', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { failStatus: 500 };
    const res = await post(w.key, { model: 'chat-small', messages: MESSAGES, stream: true });
    assert.equal(res.status, 200);
    const events = await readSse(res);
    assert.deepEqual(events.slice(-1), ['[DONE]']);
    const err = JSON.parse(events.at(-2)!);
    assert.equal(err.error.type, 'upstream_error');
    assert.match(err.error.message, /provider answered 500/);
    await expectUntouched(w, 'upstream_error');
  });

  test('stream: upstream cut mid-stream: content, then the error event and [DONE], nothing charged', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: USAGE, cutAfterChunks: 3 };
    const res = await post(w.key, { model: 'chat-small', messages: MESSAGES, stream: true, stream_options: { include_usage: true } });
    const events = await readSse(res);
    const content = events.slice(0, -2).map((e) => JSON.parse(e));
    assert.equal(content.length, 4, 'the role chunk and three content chunks arrived');
    assert.equal(JSON.parse(events.at(-2)!).error.type, 'upstream_error');
    assert.equal(events.at(-1), '[DONE]');
    await expectUntouched(w, 'upstream_error');
  });

  test('stream: upstream goes idle mid-stream (idle timeout): error event, nothing charged', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: USAGE, chunkDelayMs: 1500 };
    const res = await post(w.key, { model: 'chat-small', messages: MESSAGES, stream: true });
    const events = await readSse(res);
    assert.equal(JSON.parse(events.at(-2)!).error.type, 'upstream_error');
    await expectUntouched(w, 'upstream_error');
  });

  test('stream: a client that disconnects is billed for everything the upstream produced', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: USAGE, chunkDelayMs: 30 };
    const abort = new AbortController();
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: MESSAGES, stream: true }),
      signal: abort.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    abort.abort();
    // The gateway keeps draining the upstream after the client left; wait for it to settle.
    await until(async () => (await usageRows(w.keyId)).length > 0, 'the drained stream settled', 30_000);
    const rows = await usageRows(w.keyId);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.status, 'client_disconnected');
    // The provider reports usage only in the stream's last chunk: an exact, non-estimated charge
    // proves the gateway read the stream to its end after the client had gone.
    assert.equal(Number(rows[0]!.estimated), 0);
    assert.equal(Number(rows[0]!.charged_usdc), CHARGE, 'the full reported usage is charged');
    assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS - CHARGE, locked_usdc: 0, available_usdc: FUNDS - CHARGE });
  });

  test('missing usage is billed from counted tokens and marked estimated', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { omitUsage: true, content: 'The quick brown fox jumps over the lazy dog.' };
    const res = await post(w.key, { model: 'chat-small', messages: [{ role: 'user', content: 'Tell me about foxes, please.' }] });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
    // o200k tokens: prompt text plus 3 per message and 3 for the reply; completion text as is.
    const prompt = countTokens('Tell me about foxes, please.') + 3 + 3;
    const completion = countTokens('The quick brown fox jumps over the lazy dog.');
    const expected = Math.ceil(prompt * 1.2 + completion * 2.4);
    const [row] = await usageRows(w.keyId);
    assert.deepEqual(
      { p: Number(row!.prompt_tokens), c: Number(row!.completion_tokens), est: Number(row!.estimated), charged: Number(row!.charged_usdc) },
      { p: prompt, c: completion, est: 1, charged: expected },
    );
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - expected);
  });

  test('missing usage in a stream is billed from the streamed text', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { omitUsage: true, content: 'one two three four five' };
    const res = await post(w.key, {
      model: 'chat-small',
      messages: [{ role: 'user', content: 'count' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const events = await readSse(res);
    assert.equal(events.at(-1), '[DONE]');
    const expected = Math.ceil((countTokens('count') + 6) * 1.2 + countTokens('one two three four five') * 2.4);
    const [row] = await usageRows(w.keyId);
    assert.equal(Number(row!.estimated), 1);
    assert.equal(Number(row!.charged_usdc), expected);
  });

  test('unknown model: 400, no lock left, nothing charged, provider not called', async () => {
    const w = await h.wallet(FUNDS);
    const calls = h.fake.received.length;
    const res = await post(w.key, { model: 'fake/does-not-exist', messages: MESSAGES });
    assert.equal(res.status, 400);
    assert.match((await res.json()).message, /unknown model "fake\/does-not-exist"; GET \/v1\/models lists/);
    assert.equal(h.fake.received.length, calls);
    assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
    const reservations = await h.gw.services.storage.db.selectFrom('reservations').selectAll().where('api_key_id', '=', w.keyId).execute();
    assert.equal(reservations.length, 0);
  });

  test('revoked key: 401, provider not called, nothing charged', async () => {
    const w = await h.wallet(FUNDS);
    await call(h.gw.url, 'DELETE', `/v1/auth/keys/${w.keyId}`, await siweProof(w.account));
    const calls = h.fake.received.length;
    const res = await post(w.key, { model: 'chat-small', messages: MESSAGES });
    assert.equal(res.status, 401);
    assert.equal((await res.json()).error, 'UNAUTHORIZED');
    assert.equal(h.fake.received.length, calls);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS);
  });

  test('insufficient balance for a stream is a plain 402, not a stream', async () => {
    const w = await h.wallet(100);
    const res = await post(w.key, { model: 'chat-small', messages: MESSAGES, stream: true });
    assert.equal(res.status, 402);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    assert.equal((await h.balance(w.account)).balance_usdc, 100);
  });
});

describe('rate limited chat', () => {
  test('429 with Retry-After and X-RateLimit-*, provider never called, nothing charged', async () => {
    const h = await startChatHarness('sqlite', { rateLimits: { chat: { perMinute: 2, perDay: 100 } } });
    try {
      h.fake.behaviour = { usage: USAGE };
      const w = await h.wallet(FUNDS);
      const post = () =>
        fetch(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'chat-small', messages: MESSAGES }),
        });
      const first = await post();
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('x-ratelimit-limit'), '2');
      assert.equal(first.headers.get('x-ratelimit-remaining'), '1');
      assert.ok(Number(first.headers.get('x-ratelimit-reset')) * 1000 > Date.now());
      assert.equal((await post()).status, 200);
      const calls = h.fake.received.length;
      const limited = await post();
      assert.equal(limited.status, 429);
      const body = await limited.json();
      assert.equal(body.error, 'RATE_LIMITED');
      assert.equal(body.message, 'rate limit exceeded');
      assert.ok(body.retry_after_ms > 0 && body.retry_after_ms <= 60_000);
      assert.equal(limited.headers.get('retry-after'), String(Math.ceil(body.retry_after_ms / 1000)));
      assert.equal(limited.headers.get('x-ratelimit-remaining'), '0');
      assert.equal(h.fake.received.length, calls, 'the provider was not called');
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * CHARGE, 'nothing charged for the refused request');
      const other = await h.wallet(FUNDS);
      const otherRes = await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${other.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', messages: MESSAGES }),
      });
      assert.equal(otherRes.status, 200, 'limits are per wallet');
      await h.gw.assertLedger();
    } finally {
      await h.stop();
    }
  });
});
