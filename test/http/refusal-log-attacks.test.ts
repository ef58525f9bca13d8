import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';

/**
 * The refusal code and field in the access log (src/http/refusal-log.ts) must never carry a secret.
 * `param` is logged when it looks like a field name, but for an unknown request field the name is
 * the client's own text: here a client (a buggy SDK wrapper, a template that splices the key into
 * the wrong place) sends its API key as a field name.
 */
describe('attack: a secret chosen as a field name reaches the refusal-log line', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { rateLimits: { chat: { perMinute: 100 } } });
  });
  after(() => h?.stop());

  test('a payment header and a bearer value never reach the line (held)', async () => {
    const w = await h.wallet(0);
    const junkPayment = Buffer.from(JSON.stringify({ x402Version: 2, payload: { signature: `0x${'cd'.repeat(65)}` } })).toString('base64');
    const res = await call(
      h.gw.url,
      'POST',
      '/v1/chat/completions',
      { model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] },
      {
        'payment-signature': junkPayment,
        authorization: `Bearer ${w.key}x`,
      },
    );
    assert.ok(res.status >= 400 && res.status < 500, res.text);
    const logs = h.gw.logs();
    for (const secret of [junkPayment, 'cd'.repeat(65), w.key]) assert.ok(!logs.includes(secret), `the log holds ${secret.slice(0, 20)}…`);
  });

  test('an API key sent as an unknown field name is refused 400, and the log line does not hold it', async () => {
    const w = await h.wallet(1_000_000);
    const body = { model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], [w.key]: true };
    const res = await call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${w.key}` });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.error, 'VALIDATION_ERROR');
    assert.equal(res.body.param, w.key, 'the answer names the field, to its own client');
    const lines = h.gw
      .logs()
      .split('\n')
      .filter((l) => l.includes('"request completed"') && l.includes('"statusCode":400'));
    assert.ok(lines.length > 0, 'the refusal is logged');
    assert.ok(!lines.at(-1)!.includes(w.key), `the access-log line holds the API key: ${lines.at(-1)!.replace(w.key, '<KEY>')}`);
    assert.match(lines.at(-1)!, /"param":"\(unknown field\)"/, 'the line still says a field was at fault');
  });
});
