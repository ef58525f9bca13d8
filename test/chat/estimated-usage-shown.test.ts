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

  /** One answer of `path`, its provider reporting 0 output beside 400 words; estimated, as the header says. */
  async function answered(path: string, body: Record<string, unknown>, auth: (key: string) => Record<string, string>) {
    const h = harness();
    h.fake.behaviour = { content, usage: { prompt_tokens: 100, completion_tokens: 0 } };
    const w = await h.wallet(1_000_000);
    const res = await call(h.gw.url, 'POST', path, { model: 'chat-small', ...body }, auth(w.key));
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
    return { usage: res.body.usage, charged: res.headers.get('x-tollgate-charged-usdc') };
  }
  const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

  test('Messages (translated): output_tokens shown = the billed estimate (control)', async () => {
    const { usage } = await answered('/v1/messages', { max_tokens: 2000, messages: [{ role: 'user', content: 'write' }] }, (key) => ({ 'x-api-key': key }));
    assert.ok(usage.output_tokens >= WORDS, JSON.stringify(usage));
  });

  test('Chat: usage.completion_tokens shown = the billed estimate', async () => {
    const { usage, charged } = await answered('/v1/chat/completions', { messages: [{ role: 'user', content: 'write' }] }, bearer);
    assert.ok(usage.completion_tokens >= WORDS, `charged ${charged} for ${JSON.stringify(usage)}`);
    assert.equal(usage.charged_usdc, Number(charged), 'the charge rides on the usage shown');
  });

  test('Responses: usage.output_tokens shown = the billed estimate', async () => {
    const { usage, charged } = await answered('/v1/responses', { input: 'write' }, bearer);
    assert.ok(usage.output_tokens >= WORDS, `charged ${charged} for ${JSON.stringify(usage)}`);
  });
});
