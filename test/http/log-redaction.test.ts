import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { createLogger } from '../../src/http/logger.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';

/**
 * Credentials travel in headers: a key (authorization, or x-api-key as the Anthropic SDK sends
 * it), a payment (x-payment, payment-signature) or a signed sign-in-with-x proof. None of their
 * values may reach a log line (review of issue 28: sign-in-with-x and x-api-key were not redacted).
 */
const SECRETS = {
  authorization: 'Bearer tg-secret-authorization-value',
  'x-api-key': 'tg-secret-x-api-key-value',
  'x-payment': 'secret-x-payment-value',
  'payment-signature': 'secret-payment-signature-value',
  'sign-in-with-x': 'secret-sign-in-with-x-value',
  cookie: 'session=secret-cookie-value',
};

describe('attack: credential headers never reach the logs', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ engine: 'sqlite' });
  });
  after(() => gw.stop());

  test('requests carrying sign-in-with-x and x-api-key log neither value', async () => {
    const body = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 10 };
    const siwx = await call(gw.url, 'POST', '/v1/chat/completions', body, { 'sign-in-with-x': SECRETS['sign-in-with-x'] });
    const anthropic = await call(gw.url, 'POST', '/v1/messages', body, { 'x-api-key': SECRETS['x-api-key'], 'anthropic-version': '2023-06-01' });
    assert.ok(siwx.status >= 400 && anthropic.status >= 400, `${siwx.status} ${anthropic.status}`);
    const logs = gw.logs();
    assert.match(logs, /request completed/, 'the requests were logged');
    assert.ok(!logs.includes(SECRETS['sign-in-with-x']), 'the sign-in-with-x value was logged');
    assert.ok(!logs.includes(SECRETS['x-api-key']), 'the x-api-key value was logged');
  });

  test('a log line carrying the headers themselves redacts every credential', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger('info', sink);
    logger.info({ headers: { ...SECRETS, 'content-type': 'application/json' } }, 'headers');
    const line = JSON.parse(lines.join(''));
    for (const [name, value] of Object.entries(SECRETS)) {
      assert.equal(line.headers[name], '[redacted]', name);
      assert.ok(!lines.join('').includes(value), `${name}'s value was logged`);
    }
    assert.equal(line.headers['content-type'], 'application/json');
  });
});
