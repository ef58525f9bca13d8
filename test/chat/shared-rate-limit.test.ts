import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ChatHarness } from '../support/chat-harness.ts';
import { startTwoChatInstances, type TwoChatInstances } from '../support/two-chat-instances.ts';

describe('two gateway instances sharing PostgreSQL and Redis', () => {
  let instances: TwoChatInstances | undefined;
  let a: ChatHarness;
  let b: ChatHarness;
  before(async () => {
    instances = await startTwoChatInstances({
      rateLimits: { backend: 'redis', chat: { perMinute: 5, perDay: 1000 }, keys: { perMinute: 1000 }, public: { perMinute: 1000 } },
    });
    ({ a, b } = instances);
  });
  after(() => instances?.stop());

  test('enforce one per-wallet limit together', async () => {
    a.fake.behaviour = b.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
    const w = await a.wallet(1_000_000);
    const send = (h: ChatHarness) =>
      fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] }),
      }).then((r) => r.status);
    const statuses = [await send(a), await send(b), await send(a), await send(b), await send(a), await send(b), await send(a)];
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429]);
    assert.equal(a.fake.received.length + b.fake.received.length, 5);
    const charged = 5 * Math.ceil(10 * 1.2 + 10 * 2.4);
    assert.equal((await a.balance(w.account)).balance_usdc, 1_000_000 - charged);
    await a.gw.assertLedger();
  });
});
