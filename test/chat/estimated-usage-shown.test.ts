import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clientSuite } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

/*
 * attack: a report of 0 output beside delivered text is billed an estimate of the output. The
 * answer's usage object the client reads must be the usage it was charged for, as the Messages
 * encoder does; Chat and Responses showed the provider's 0 beside the estimate's charge.
 */
const WORDS = 400;
const content = 'lorem '.repeat(WORDS).trimEnd();

describe('the usage shown beside a charge for an estimated output', () => {
  const harness = clientSuite({});

  test('Messages (translated): output_tokens shown = the billed estimate (control)', async () => {
    const h = harness();
    h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: 0 } };
    const w = await h.wallet(1_000_000);
    const res = await call(
      h.gw.url,
      'POST',
      '/v1/messages',
      { model: 'chat-small', max_tokens: 2000, messages: [{ role: 'user', content: 'write' }] },
      { 'x-api-key': w.key },
    );
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
    assert.ok(res.body.usage.output_tokens >= WORDS, JSON.stringify(res.body.usage));
  });

  test('Chat: usage.completion_tokens shown = the billed estimate', async () => {
    const h = harness();
    h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: 0 } };
    const w = await h.wallet(1_000_000);
    const res = await call(
      h.gw.url,
      'POST',
      '/v1/chat/completions',
      { model: 'chat-small', messages: [{ role: 'user', content: 'write' }] },
      { authorization: `Bearer ${w.key}` },
    );
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
    assert.ok(res.body.usage.completion_tokens >= WORDS, `charged ${res.headers.get('x-tollgate-charged-usdc')} for ${JSON.stringify(res.body.usage)}`);
  });

  test('Responses: usage.output_tokens shown = the billed estimate', async () => {
    const h = harness();
    h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: 0 } };
    const w = await h.wallet(1_000_000);
    const res = await call(h.gw.url, 'POST', '/v1/responses', { model: 'chat-small', input: 'write' }, { authorization: `Bearer ${w.key}` });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
    assert.ok(res.body.usage.output_tokens >= WORDS, `charged ${res.headers.get('x-tollgate-charged-usdc')} for ${JSON.stringify(res.body.usage)}`);
  });
});
