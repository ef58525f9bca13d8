import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, describe, test } from 'node:test';
import { readSse, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { expectNothingCharged, usageRowsOf } from '../support/usage-rows.ts';
import { until } from '../support/until.ts';

/*
 * A provider whose stream starts, then sends one event that never ends: a `data:` line with no line
 * break, 64 KiB at a time (a broken proxy, a provider looping on one token, a hostile endpoint).
 * The stream's idle timeout never fires (bytes keep coming), and no event completes, so nothing
 * reaches the client. The defect: the gateway's SSE parser (src/metered/stream-pump.ts) buffered
 * the unfinished event without a bound, so the gateway read, and held in memory, everything the
 * provider sent (128 MiB here, before the provider gave up; without that cap, until the process ran
 * out of memory, taking every other request with it). Every other size is bounded
 * (docs: attack checklist, "stream idle"); one event of the provider's must be too.
 */
const FUNDS = 1_000_000;
/** The most the provider sends before it ends the connection itself (the test's own safety net). */
const PROVIDER_CAP = 128 * 1024 * 1024;
const PIECE = Buffer.alloc(64 * 1024, 'a');

/** A provider that answers 200 with `head`, then PIECE after PIECE without end, counting what it sent and when it was hung up on. */
async function endlessProvider(contentType: string, head: string[]) {
  const seen = { sent: 0, hungUpAt: null as number | null };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      seen.sent = 0;
      seen.hungUpAt = null;
      res.on('close', () => {
        if (!res.writableFinished) seen.hungUpAt = seen.sent;
      });
      res.writeHead(200, { 'content-type': contentType });
      for (const part of head) res.write(part);
      while (!res.destroyed && seen.sent < PROVIDER_CAP) {
        seen.sent += PIECE.length;
        if (!res.write(PIECE)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
      }
      if (!res.destroyed) res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, seen, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

/** The provider was hung up on before it had sent half of its cap: the gateway stopped reading at its bound. */
async function expectHungUpEarly(seen: { sent: number; hungUpAt: number | null }, what: string): Promise<void> {
  // The provider learns of the hang-up once the closed connection reaches it (or not at all, when it sent everything).
  await until(() => seen.hungUpAt !== null || seen.sent >= PROVIDER_CAP, 'the provider hung up on or done', 10_000).catch(() => undefined);
  assert.ok(
    seen.hungUpAt !== null && seen.hungUpAt < PROVIDER_CAP / 2,
    `the gateway hung up on the provider before reading half of its ${PROVIDER_CAP} bytes (it read ${seen.sent} bytes of ${what})`,
  );
}

describe('a provider streaming one event that never ends', () => {
  let h: ChatHarness;
  let provider: Awaited<ReturnType<typeof endlessProvider>>;

  before(async () => {
    provider = await endlessProvider('text/event-stream', [
      'data: {"id":"chatcmpl-endless","object":"chat.completion.chunk","created":1,"model":"chat-small","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n',
      'data: {"id":"chatcmpl-endless","object":"chat.completion.chunk","created":1,"model":"chat-small","choices":[{"index":0,"delta":{"content":"',
    ]);
    h = await startChatHarness('sqlite', { providers: { fake: { baseUrl: provider.url } } });
  });
  afterEach(() => h.gw.assertLedger());
  after(async () => {
    await h.stop();
    provider.server.closeAllConnections();
    provider.server.close();
  });

  test("the gateway stops reading at a bound, ends the client's stream with the error event, charges nothing", async () => {
    const w = await h.wallet(FUNDS);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    assert.equal(res.status, 200);
    const events = await readSse(res);
    assert.equal(events.at(-1), '[DONE]');
    assert.equal(JSON.parse(events.at(-2)!).error?.type, 'upstream_error', events.at(-2));
    await until(async () => (await usageRowsOf(h, w.keyId)).length === 1, 'the request closed');
    await expectNothingCharged(h, w, FUNDS);
    await expectHungUpEarly(provider.seen, 'one unfinished event');
  });
});

describe('a provider answering a JSON request with a body that never ends', () => {
  /*
   * The same provider for a request that is not streamed: 200, application/json, then the answer's
   * text without end. The defect: the whole body was read with no bound (src/metered/complete.ts,
   * `res.body.text()`), so the gateway held everything the provider sent before it could even fail
   * to parse it (embeddings bound theirs: src/embeddings/limits.ts).
   */
  let h: ChatHarness;
  let provider: Awaited<ReturnType<typeof endlessProvider>>;

  before(async () => {
    provider = await endlessProvider('application/json', [
      '{"id":"chatcmpl-endless","object":"chat.completion","created":1,"model":"chat-small","choices":[{"index":0,"message":{"role":"assistant","content":"',
    ]);
    h = await startChatHarness('sqlite', { providers: { fake: { baseUrl: provider.url } } });
  });
  afterEach(() => h.gw.assertLedger());
  after(async () => {
    await h.stop();
    provider.server.closeAllConnections();
    provider.server.close();
  });

  // The bound depends on the plan (src/metered/answer-bound.ts): n × max_tokens tokens, with their logprobs when asked for.
  test('the gateway stops reading at a bound and answers 502, nothing charged', async () => {
    const w = await h.wallet(FUNDS);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 502, await res.clone().text());
    await res.text();
    await expectNothingCharged(h, w, FUNDS);
    await expectHungUpEarly(provider.seen, 'one unfinished answer');
  });
});
