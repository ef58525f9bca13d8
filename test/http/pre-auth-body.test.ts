import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { postHead, rawRequest } from '../support/raw-http.ts';

// The chat route accepts 10 MiB; read and parsed before the key is looked at, it would let
// an anonymous client make the gateway parse 10 MiB per request.
// Each client below announces a 10 MiB body and sends none of it: the answer must come anyway,
// which it can only if the gateway decided on the headers alone.

const TEN_MIB = 10 * 1024 * 1024;
/** Far longer than an answer takes; only reached when the gateway waits for the body (the old code). */
const NO_ANSWER_AFTER_MS = 15_000;

async function answerWithoutBody(url: string, headers: Record<string, string>): Promise<string> {
  const client = await rawRequest(url, postHead('/v1/chat/completions', TEN_MIB, headers));
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), NO_ANSWER_AFTER_MS)));
  const line = await Promise.race([client.statusLine(), waited]);
  clearTimeout(timer);
  const text = client.received();
  client.socket.destroy();
  assert.ok(line, 'no answer while the body was unsent: the gateway waited for the body before checking the key');
  return text;
}

describe('chat: key and rate limit are checked before the body is read', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { rateLimits: { chat: { perMinute: 1 } } });
  });
  after(() => h.stop());

  test('a missing or bad key is 401 before any body byte is sent', async () => {
    const variants: Record<string, string>[] = [{}, { Authorization: 'Bearer sk-not-a-key' }, { Authorization: `Bearer sk-${'a'.repeat(48)}` }];
    for (const headers of variants) {
      const text = await answerWithoutBody(h.gw.url, headers);
      assert.match(text, /^HTTP\/1\.1 401/, JSON.stringify(headers));
      assert.match(text, /"error":"UNAUTHORIZED"/);
    }
  });

  test('a rate-limited wallet gets its 429 before any body byte is sent', async () => {
    const { key } = await h.wallet(1_000_000);
    await h.client(key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    const text = await answerWithoutBody(h.gw.url, { Authorization: `Bearer ${key}` });
    assert.match(text, /^HTTP\/1\.1 429/);
    assert.match(text, /\r\nretry-after: \d+\r\n/i);
    assert.match(text, /"error":"RATE_LIMITED"/);
    await h.gw.assertLedger();
  });

  test('a client that sends its 10 MiB anyway reads the 401', async () => {
    const body = `{"model":"fake/chat-small","messages":[${'{},'.repeat(TEN_MIB / 3 - 20)}{}]}`;
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-nope' },
      body,
    });
    assert.equal(res.status, 401);
    assert.equal((await res.json()).error, 'UNAUTHORIZED');
  });
});
