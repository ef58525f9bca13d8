import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { postHead, rawRequest } from '../../support/raw-http.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

/**
 * With pay-per-request on, a chat request with no key is read, priced and paid, so its body is
 * read. POST /v1/messages/count_tokens is never paid: a request with no key can only be its 401.
 * It took the chat routes' hook, so with pay-per-request on an anonymous count waited for its body
 * (limits.countTokensBodyBytes, 4 MiB) and had it parsed before the 401 (SECURITY 4.1: a missing
 * key is 401 before any body byte is read), and a client that never sent the body held the request
 * open until server.requestTimeoutSeconds.
 */
const NO_ANSWER_AFTER_MS = 8_000;

describe('pay-per-request on: an anonymous count_tokens is 401 before its body is read', () => {
  let h: PayPerRequestHarness;
  before(async () => {
    h = await startPayPerRequestHarness('sqlite');
  });
  after(() => h.stop());

  test('announcing 4 MiB and sending none of it: the 401 comes anyway', async () => {
    const client = await rawRequest(h.gw.url, postHead('/v1/messages/count_tokens', 4 * 1024 * 1024, { 'anthropic-version': '2023-06-01' }));
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), NO_ANSWER_AFTER_MS)));
    const line = await Promise.race([client.statusLine(), waited]);
    clearTimeout(timer);
    const text = client.received();
    client.socket.destroy();
    assert.ok(line, 'no answer while the body was unsent: the gateway waited for the body of a request it can only refuse');
    assert.match(text, /^HTTP\/1\.1 401/);
  });
});
