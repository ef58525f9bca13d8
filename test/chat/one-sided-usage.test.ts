import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { waitForUsageRow } from '../support/usage-rows.ts';
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

describe('attack: usage reports the bill cannot use, beside a delivered answer', () => {
  const harness = clientSuite({});
  const stream = async (h: ReturnType<typeof harness>, key: string) => {
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ ...chatBody, stream: true, stream_options: { include_usage: true } }),
    });
    assert.equal(res.status, 200);
    await readSse(res);
  };

  // Several OpenAI-compatible servers put a usage on early chunks (the prompt counted, no output yet).
  test('stream: a first chunk with {100, 0} and a final usage lacking completion_tokens is estimated, not billed from the first', async () => {
    const h = harness();
    let first = true;
    h.fake.behaviour = {
      content,
      usage: { prompt_tokens: 100, completion_tokens: WORDS },
      usageExtra: { completion_tokens: undefined },
      rewriteChunk: (json) => {
        const c = JSON.parse(json);
        if (!first || !c.choices?.length) return json;
        first = false;
        return JSON.stringify({ ...c, usage: { prompt_tokens: 100, completion_tokens: 0, total_tokens: 100 } });
      },
    };
    const w = await h.wallet(1_000_000);
    await stream(h, w.key);
    const charged = 1_000_000 - Number((await h.balance(w.account)).balance_usdc);
    assert.ok(charged > A_FREE_ANSWER, `charged ${charged}: billed from the first chunk's usage`);
  });

  test('a report of 0 completion tokens beside a delivered answer is estimated for its output, its prompt kept as reported', async () => {
    const h = harness();
    h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: 0 } };
    const w = await h.wallet(1_000_000);
    const res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${w.key}` });
    assert.equal(res.status, 200, res.text);
    assert.ok(Number(res.headers.get('x-tollgate-charged-usdc')) > A_FREE_ANSWER, res.headers.get('x-tollgate-charged-usdc') ?? '');
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
    const row = await h.gw.services.storage.db
      .selectFrom('request_usage')
      .select(['prompt_tokens', 'completion_tokens'])
      .where('api_key_id', '=', w.keyId)
      .executeTakeFirstOrThrow();
    assert.equal(Number(row.prompt_tokens), 100, 'the reported prompt side');
    assert.ok(Number(row.completion_tokens) >= WORDS);
    h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: 0 } };
    await stream(h, w.key);
    const rows = await h.gw.services.storage.db
      .selectFrom('request_usage')
      .select(['completion_tokens', 'estimated'])
      .where('api_key_id', '=', w.keyId)
      .execute();
    assert.ok(Number(rows[1]!.completion_tokens) >= WORDS, `the stream: ${JSON.stringify(rows[1])}`);
  });

  test('control: an answer with no text reported as 0 completion tokens is billed as reported', async () => {
    const h = harness();
    h.fake.behaviour = { content: '', usage: { prompt_tokens: 100, completion_tokens: 0 } };
    const w = await h.wallet(1_000_000);
    const res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${w.key}` });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'false');
    assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), 120);
  });
});

describe('attack: an Anthropic usage with a negative count', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  for (const stream of [false, true]) {
    test(`${stream ? 'stream' : 'JSON'}: output_tokens -1 is estimated, not read as 0`, async () => {
      resetProviders(h, { content, usage: { input_tokens: 10, output_tokens: -1 } });
      const w = await h.wallet(5_000_000);
      const body = { model: 'anth/claude-test', max_tokens: 2000, messages: [{ role: 'user', content: 'write' }], stream };
      const res = await call(h.gw.url, 'POST', '/v1/chat/completions', stream ? { ...body, stream_options: { include_usage: true } } : body, {
        authorization: `Bearer ${w.key}`,
      });
      assert.equal(res.status, 200, res.text);
      const row = await waitForUsageRow(h, w.keyId);
      assert.ok(Number(row.completion_tokens) > 100, `the ${WORDS}-word answer was billed ${row.completion_tokens} completion tokens`);
      assert.equal(Boolean(row.estimated), true);
    });
  }
});
