import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';

/**
 * A model whose provider has no key answers 503 PROVIDER_NOT_CONFIGURED until the operator sets the
 * key and restarts. The stock openai SDK retries a 503 twice by default (and honours Retry-After), so
 * the refusal must tell it not to: one request reaches the gateway, not three.
 */
describe('503 PROVIDER_NOT_CONFIGURED is a configuration error: the stock openai SDK does not retry it', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', {}, { env: { FAKE_KEY: '' } });
  });
  after(() => h?.stop());

  /** Refusals the gateway logged for this missing key: one per request that reached it. */
  const refusalsLogged = () =>
    h.gw
      .logs()
      .split('\n')
      .filter((l) => l.includes('"variable":"FAKE_KEY"') && l.includes('refused a request')).length;

  test('x-should-retry: false and no Retry-After; the SDK with its defaults sends the request once', async () => {
    const { key } = await h.wallet(1_000_000);
    const raw = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(raw.status, 503);
    assert.equal(((await raw.json()) as { error: string }).error, 'PROVIDER_NOT_CONFIGURED');
    assert.equal(raw.headers.get('x-should-retry'), 'false');
    assert.equal(raw.headers.get('retry-after'), null);

    const before = refusalsLogged();
    // The SDK as shipped: maxRetries 2, its own backoff; only the base URL and key are ours.
    const client = new OpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: key });
    const err = await client.chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.APIError, String(err));
    assert.equal(err.status, 503);
    assert.equal(refusalsLogged() - before, 1, 'the SDK sent the request once');
    assert.equal(h.fake.received.length, 0);
    await h.gw.assertLedger();
  });
});
