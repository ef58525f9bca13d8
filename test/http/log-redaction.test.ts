import assert from 'node:assert/strict';
import { capturedLines } from '../support/capture-logger.ts';
import { describe, test } from 'node:test';
import { createLogger } from '../../src/http/logger.ts';

/**
 * Credentials travel in headers: a key (authorization, or x-api-key as the Anthropic SDK sends
 * it), a payment (x-payment, payment-signature) or a signed sign-in-with-x proof. The request log
 * line keeps no headers at all (errors.test.ts checks real requests); any other line that carries
 * them must show none of their values (sign-in-with-x and x-api-key included: they carry
 * credentials too).
 */
const SECRETS = {
  authorization: 'Bearer tg-secret-authorization-value',
  'x-api-key': 'tg-secret-x-api-key-value',
  'x-payment': 'secret-x-payment-value',
  'payment-signature': 'secret-payment-signature-value',
  'sign-in-with-x': 'secret-sign-in-with-x-value',
  cookie: 'session=secret-cookie-value',
};

describe('attack: credential headers in a log line', () => {
  test('every credential header is redacted, other headers are kept', () => {
    const { lines, sink } = capturedLines();
    createLogger('info', sink).info({ headers: { ...SECRETS, 'content-type': 'application/json' } }, 'headers');
    const text = lines.join('');
    const line = JSON.parse(text);
    for (const [name, value] of Object.entries(SECRETS)) {
      assert.equal(line.headers[name], '[redacted]', name);
      assert.ok(!text.includes(value), `${name}'s value was logged`);
    }
    assert.equal(line.headers['content-type'], 'application/json');
  });

  test('a request logged under req keeps none of its headers (its serializer is the only guard there: no redaction path under req)', () => {
    const { lines, sink } = capturedLines();
    const req = { method: 'POST', url: '/v1/chat/completions?siwe=0xsecret-query', ip: '127.0.0.1', headers: SECRETS };
    createLogger('info', sink).info({ req, res: { statusCode: 200 } }, 'request completed');
    const text = lines.join('');
    for (const [name, value] of Object.entries(SECRETS)) assert.ok(!text.includes(value), `${name}'s value was logged`);
    assert.ok(!text.includes('0xsecret-query'), 'a query value was logged');
    assert.deepEqual(JSON.parse(text).req, { method: 'POST', url: '/v1/chat/completions?siwe=[redacted]', remoteAddress: '127.0.0.1' });
  });
});
