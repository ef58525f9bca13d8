import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clientSuite, readSse } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

/*
 * An OpenAI-compatible provider whose usage carries the prompt count only (completion_tokens left
 * out, null, or a string, which the reader treats as absent) had the delivered answer's completion
 * billed as 0 tokens: the reader gave up on the usage only when both counts were missing. Now a usage
 * lacking either count is no usage, as docs/DECISIONS.md says and the Anthropic reader does, and the
 * answer is estimated.
 */
const WORDS = 400;
const content = 'lorem '.repeat(WORDS).trimEnd();
const chatBody = { model: 'chat-small', messages: [{ role: 'user', content: 'write a long answer' }] };
// chat-small: prompt 1.2, completion 2.4 micro-USDC a token; 100 prompt tokens alone are 120.
const PROMPT_ONLY_CHARGE = 120;
const A_FREE_ANSWER = PROMPT_ONLY_CHARGE + 200 * 2.4;

describe('attack: an OpenAI-compatible usage without completion_tokens bills the delivered answer for nothing', () => {
  // The ledger is checked after each test (clientSuite).
  const harness = clientSuite({});

  for (const [what, missing] of [
    ['left out', { completion_tokens: undefined }],
    ['null', { completion_tokens: null }],
    ['a string', { completion_tokens: String(WORDS) }],
    ['negative', { completion_tokens: -1 }],
  ] as const) {
    test(`JSON answer, completion_tokens ${what}: the completion is estimated and charged`, async () => {
      const h = harness();
      h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: WORDS }, usageExtra: { ...missing } };
      const w = await h.wallet(1_000_000);
      const res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${w.key}` });
      assert.equal(res.status, 200, res.text);
      assert.ok(res.body.choices[0].message.content.length > 1000, 'the whole answer was delivered');
      const charged = Number(res.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged > A_FREE_ANSWER, `charged ${charged}: the ${WORDS}-word completion was billed as 0 tokens`);
      assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
    });
  }

  test('stream, a usage chunk without completion_tokens: the streamed completion is estimated and charged', async () => {
    const h = harness();
    h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: WORDS }, usageExtra: { completion_tokens: undefined } };
    const w = await h.wallet(1_000_000);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
      body: JSON.stringify({ ...chatBody, stream: true, stream_options: { include_usage: true } }),
    });
    assert.equal(res.status, 200);
    await readSse(res);
    const charged = 1_000_000 - Number((await h.balance(w.account)).balance_usdc);
    assert.ok(charged > A_FREE_ANSWER, `charged ${charged}: the streamed ${WORDS}-word completion was billed as 0 tokens`);
  });

  test('control: a usage with both counts is billed as reported', async () => {
    const h = harness();
    h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: WORDS } };
    const w = await h.wallet(1_000_000);
    const res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${w.key}` });
    assert.equal(res.status, 200, res.text);
    assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), Math.ceil(100 * 1.2 + WORDS * 2.4));
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'false');
  });
});
