import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';

const MESSAGES = [{ role: 'user', content: 'hi' }];

describe('chat request validation and routing', () => {
  let h: ChatHarness;
  let key: string;
  before(async () => {
    h = await startChatHarness('sqlite');
    key = (await h.wallet(10_000_000)).key;
  });
  beforeEach(() => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  async function post(body: unknown, raw?: string) {
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: raw ?? JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }

  const lastSent = () => h.fake.received.at(-1)!.body;

  test('missing model and messages: one message naming both', async () => {
    const res = await post({});
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, { error: 'VALIDATION_ERROR', message: 'model and messages are required', param: 'model' });
    assert.equal((await post({ model: 'chat-small' })).body.message, 'messages is required');
    assert.equal((await post({ messages: MESSAGES })).body.message, 'model is required');
  });

  test('malformed fields are 400 with the field named', async () => {
    const cases: [unknown, RegExp][] = [
      [{ model: 42, messages: MESSAGES }, /^model must be a string/],
      [{ model: 'chat-small', messages: [] }, /^messages must be a non-empty array/],
      [{ model: 'chat-small', messages: 'hi' }, /^messages must be a non-empty array/],
      [{ model: 'chat-small', messages: [{ content: 'no role' }] }, /^messages\[0\] must be an object with a string role/],
      [{ model: 'chat-small', messages: MESSAGES, stream: 'yes' }, /^stream must be true or false/],
      [{ model: 'chat-small', messages: MESSAGES, max_tokens: 0 }, /^max_tokens must be a positive whole number/],
      [{ model: 'chat-small', messages: MESSAGES, max_tokens: 1.5 }, /^max_tokens must be a positive whole number/],
      [{ model: 'chat-small', messages: MESSAGES, max_tokens: '100' }, /^max_tokens must be a positive whole number/],
      [{ model: 'chat-small', messages: MESSAGES, max_tokens: 5000 }, /above fake\/chat-small's limit of 4096/],
      [{ model: 'chat-small', messages: MESSAGES, max_tokens: 10, max_completion_tokens: 20 }, /disagree/],
      [{ model: 'chat-small', messages: MESSAGES, n: 0 }, /^n must be a whole number from 1 to 16/],
      [{ model: 'chat-small', messages: MESSAGES, n: 17 }, /^n must be a whole number/],
      // On an effort-family model the value is checked; a model of no family gets it as it came (spec 4.7).
      [{ model: 'effort', messages: MESSAGES, reasoning_effort: 'extreme' }, /reasoning_effort must be one of/],
    ];
    const calls = h.fake.received.length;
    for (const [body, pattern] of cases) {
      const res = await post(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.error, 'VALIDATION_ERROR');
      assert.match(res.body.message, pattern, JSON.stringify(body));
    }
    assert.equal(h.fake.received.length, calls, 'nothing invalid reached the provider');
    const bad = await post(undefined, '{"model": "chat-small",');
    assert.equal(bad.status, 400);
  });

  test('model ids: provider/model and a unique bare name both resolve; an ambiguous bare name lists the candidates', async () => {
    assert.equal((await post({ model: 'fake/chat-small', messages: MESSAGES })).status, 200);
    assert.equal((await post({ model: 'chat-small', messages: MESSAGES })).status, 200);
    assert.equal((await post({ model: 'other/shared-name', messages: MESSAGES })).status, 200);
    const ambiguous = await post({ model: 'shared-name', messages: MESSAGES });
    assert.equal(ambiguous.status, 400);
    assert.match(ambiguous.body.message, /offered by several providers; use one of fake\/shared-name, other\/shared-name/);
    assert.deepEqual(ambiguous.body.candidates, ['fake/shared-name', 'other/shared-name']);
  });

  test('max_completion_tokens is treated like max_tokens and forwarded under its own name', async () => {
    await post({ model: 'chat-small', messages: MESSAGES, max_completion_tokens: 77 });
    assert.equal(lastSent().max_completion_tokens, 77);
    assert.equal(lastSent().max_tokens, undefined);
    await post({ model: 'effort', messages: MESSAGES });
    assert.equal(lastSent().max_completion_tokens, 1024, 'effort-family models get max_completion_tokens');
  });

  test('n is reserved and billed for every choice', async () => {
    const w = await h.wallet(0);
    // One choice of 1024 tokens reserves about 2.5k micro-USDC; n = 3 needs three times that.
    await h.gw.services.storage.db.transaction().execute(async (trx) => {
      const { applyMovement } = await import('../../src/ledger/movements.ts');
      await applyMovement(trx, { wallet: w.account.address, kind: 'adjustment', amountUsdc: 5000 });
    });
    const poor = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: MESSAGES, n: 3 }),
    });
    assert.equal(poor.status, 402);
    const body = await poor.json();
    assert.ok(body.required_usdc >= 3 * 1024 * 2.4, `required ${body.required_usdc} covers 3 × 1024 completion tokens`);
    h.fake.behaviour = {};
    const ok = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: MESSAGES, n: 2, max_tokens: 100 }),
    });
    assert.equal(ok.status, 200);
    const json = await ok.json();
    assert.equal(json.choices.length, 2);
    assert.equal(Number(ok.headers.get('x-tollgate-charged-usdc')), Math.ceil(json.usage.prompt_tokens * 1.2 + json.usage.completion_tokens * 2.4));
  });

  test('reasoning: forward routes thinking and reasoning_effort per model family', async () => {
    await post({ model: 'thinker', messages: MESSAGES, reasoning_effort: 'high' });
    assert.deepEqual(lastSent().thinking, { type: 'enabled', budget_tokens: 16384 });
    assert.equal(lastSent().reasoning_effort, undefined);

    await post({ model: 'thinker', messages: MESSAGES, thinking: { type: 'enabled', budget_tokens: 2000 }, reasoning_effort: 'low' });
    assert.deepEqual(lastSent().thinking, { type: 'enabled', budget_tokens: 2000 });
    assert.equal(lastSent().reasoning_effort, undefined);

    await post({ model: 'effort', messages: MESSAGES, thinking: { type: 'enabled', budget_tokens: 3000 } });
    assert.equal(lastSent().reasoning_effort, 'medium');
    assert.equal(lastSent().thinking, undefined);

    await post({ model: 'effort', messages: MESSAGES, thinking: { type: 'disabled' } });
    assert.equal(lastSent().reasoning_effort, undefined);

    await post({ model: 'chat-small', messages: MESSAGES, thinking: { type: 'enabled', budget_tokens: 10 }, reasoning_effort: 'low' });
    assert.deepEqual(lastSent().thinking, { type: 'enabled', budget_tokens: 10 }, 'other models get both as they came');
    assert.equal(lastSent().reasoning_effort, 'low');
  });

  test('reasoning: reject refuses either field with 400 before any money moves', async () => {
    const strict = await startChatHarness('sqlite', { chat: { reasoning: 'reject' } });
    try {
      const w = await strict.wallet(1_000_000);
      for (const extra of [{ thinking: { type: 'enabled', budget_tokens: 100 } }, { reasoning_effort: 'low' }]) {
        const res = await fetch(`${strict.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'chat-small', messages: MESSAGES, ...extra }),
        });
        assert.equal(res.status, 400);
        assert.match((await res.json()).message, /not accepted by this gateway; remove them/);
      }
      assert.equal(strict.fake.received.length, 0);
      assert.deepEqual(await strict.balance(w.account), { balance_usdc: 1_000_000, locked_usdc: 0, available_usdc: 1_000_000 });
    } finally {
      await strict.stop();
    }
  });

  test('a chat body above the chat limit is 413; other routes keep the small limit', async () => {
    const small = await startChatHarness('sqlite', { limits: { chatBodyBytes: 200_000 } });
    try {
      const w = await small.wallet(1_000_000);
      const res = await fetch(`${small.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'x'.repeat(300_000) }] }),
      });
      assert.equal(res.status, 413);
      const okSize = await fetch(`${small.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'x'.repeat(100_000) }], max_tokens: 10 }),
      });
      assert.equal(okSize.status, 200, 'a 100 KB prompt is fine on chat though above the 64 KiB default elsewhere');
    } finally {
      await small.stop();
    }
  });
});
