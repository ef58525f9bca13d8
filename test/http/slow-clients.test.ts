import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startChatHarness, readSse, type ChatHarness } from '../support/chat-harness.ts';
import { postHead, rawRequest, type RawClient } from '../support/raw-http.ts';

// Fastify leaves Node's requestTimeout at 0, where a client dribbling its body one byte at a
// time holds its socket (and its slot) for as long as it likes. Small timeouts here; the
// defaults are 10 s for headers and 30 s for the whole request.
const HEADERS_TIMEOUT_S = 1;
const REQUEST_TIMEOUT_S = 2;
/** A dribbler below would need 200 s to finish; the test gives up long before that. */
const GIVE_UP_MS = 20_000;

function dribble(client: RawClient, text: string, everyMs: number): NodeJS.Timeout {
  let i = 0;
  const timer = setInterval(() => {
    if (client.isClosed() || i >= text.length) return clearInterval(timer);
    client.socket.write(text[i++]!);
  }, everyMs);
  return timer;
}

async function allClosed(clients: RawClient[]): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(clients.map((c) => c.closed)), new Promise((r) => (timer = setTimeout(r, GIVE_UP_MS)))]);
  clearTimeout(timer);
  return clients.filter((c) => c.isClosed()).length;
}

describe('slow clients are cut off', () => {
  let h: ChatHarness;
  let key: string;
  before(async () => {
    h = await startChatHarness('sqlite', { server: { headersTimeoutSeconds: HEADERS_TIMEOUT_S, requestTimeoutSeconds: REQUEST_TIMEOUT_S } });
    key = (await h.wallet(1_000_000)).key;
  });
  after(() => h.stop());

  test('50 sockets dribbling a chat body are closed by the server', async () => {
    const started = Date.now();
    const body = JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'x'.repeat(1000) }] });
    const clients = await Promise.all(
      Array.from({ length: 50 }, () => rawRequest(h.gw.url, postHead('/v1/chat/completions', body.length, { Authorization: `Bearer ${key}` }))),
    );
    const timers = clients.map((c) => dribble(c, body, 200));
    const closed = await allClosed(clients);
    timers.forEach(clearInterval);
    clients.forEach((c) => c.socket.destroy());
    console.log(`${closed} of 50 dribbling sockets closed by the server after ${Date.now() - started} ms (requestTimeout ${REQUEST_TIMEOUT_S} s)`);
    assert.equal(closed, 50);
    for (const c of clients) assert.doesNotMatch(c.received(), /^HTTP\/1\.1 200/, 'a dribbled request was served');
    await h.gw.assertLedger();
  });

  test('10 sockets dribbling their headers are closed by the server', async () => {
    const head = postHead('/v1/chat/completions', 10, { Authorization: `Bearer ${key}`, 'X-Padding': 'p'.repeat(1000) });
    const clients = await Promise.all(Array.from({ length: 10 }, () => rawRequest(h.gw.url, head.slice(0, 20))));
    const timers = clients.map((c) => dribble(c, head.slice(20), 200));
    const closed = await allClosed(clients);
    timers.forEach(clearInterval);
    clients.forEach((c) => c.socket.destroy());
    assert.equal(closed, 10);
  });

  test('a streamed answer that lasts longer than requestTimeout is not cut', async () => {
    // The timeouts bound receiving the request; the answer may take as long as the model does.
    h.fake.behaviour = { chunkDelayMs: 400 };
    try {
      const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true }),
      });
      const started = Date.now();
      const events = await readSse(res);
      const lasted = Date.now() - started;
      assert.ok(lasted > REQUEST_TIMEOUT_S * 1000, `the stream lasted only ${lasted} ms; it must outlast requestTimeout to show anything`);
      assert.equal(events.at(-1), '[DONE]');
      const text = events
        .slice(0, -1)
        .map((e) => JSON.parse(e).choices[0]?.delta?.content ?? '')
        .join('');
      assert.equal(text, 'Hello from the fake provider, a stand-in for a paid model.');
    } finally {
      h.fake.behaviour = {};
    }
    await h.gw.assertLedger();
  });
});
