import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { createKeyProof, newAccount } from '../support/siwe.ts';

const PROMPT = 'PROMPT-TEXT-THAT-MUST-NOT-BE-LOGGED';

/**
 * An operator reads why a client fails from the log: every refused request's one log line carries
 * the refusal's code, and the request field at fault when the refusal names one. Never a credential,
 * the body, or a signature.
 */
describe('the access log says why a request was refused', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { rateLimits: { chat: { perMinute: 2 } } });
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
  });
  after(() => h?.stop());

  /** The `request completed` line of the last request to `path` answered `status`. */
  function lineOf(status: number, path: string): Record<string, any> {
    const lines = h.gw
      .logs()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'request completed' && l.res?.statusCode === status && l.req?.url?.startsWith(path));
    assert.ok(lines.length, `a log line for ${status} ${path}`);
    return lines.at(-1)!;
  }

  const chat = (key: string, body: Record<string, unknown> = {}) => {
    const request = { model: 'chat-small', messages: [{ role: 'user', content: PROMPT }], ...body };
    return call(h.gw.url, 'POST', '/v1/chat/completions', request, { authorization: `Bearer ${key}` });
  };

  test('400, 401, 402, 404 and 429 each log their code (and the field of a validation error), and no secret', async () => {
    const rich = await h.wallet(1_000_000);
    const poor = await h.wallet(0);
    const wrongKey = `${rich.key.slice(0, -6)}zzzzzz`;

    const invalid = await chat(rich.key, { max_tokens: -1 });
    assert.equal(invalid.status, 400, invalid.text);
    assert.deepEqual(pick(lineOf(400, '/v1/chat/completions').res), { statusCode: 400, code: 'VALIDATION_ERROR', param: invalid.body.param });
    assert.equal(invalid.body.param, 'max_tokens');

    assert.equal((await chat(wrongKey)).status, 401);
    assert.deepEqual(pick(lineOf(401, '/v1/chat/completions').res), { statusCode: 401, code: 'UNAUTHORIZED' });

    const proof = await createKeyProof(newAccount());
    const forged = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...proof, signature: `0x${'ab'.repeat(65)}` });
    assert.equal(forged.status, 401);
    assert.equal(lineOf(401, '/v1/auth/keys').res.code, 'UNAUTHORIZED');

    assert.equal((await chat(poor.key)).status, 402);
    assert.deepEqual(pick(lineOf(402, '/v1/chat/completions').res), { statusCode: 402, code: 'INSUFFICIENT_BALANCE' });

    assert.equal((await call(h.gw.url, 'GET', '/v1/nowhere')).status, 404);
    assert.deepEqual(pick(lineOf(404, '/v1/nowhere').res), { statusCode: 404, code: 'NOT_FOUND' });

    // The 400 above used up one of the two: the window is counted before the body is checked.
    const statuses = [(await chat(rich.key)).status, (await chat(rich.key)).status];
    assert.deepEqual(statuses, [200, 429]);
    assert.deepEqual(pick(lineOf(429, '/v1/chat/completions').res), { statusCode: 429, code: 'RATE_LIMITED' });
    assert.equal(lineOf(200, '/v1/chat/completions').res.code, undefined, 'an answered request names no refusal');

    const logs = h.gw.logs();
    for (const secret of [rich.key, wrongKey, poor.key, PROMPT, proof.signature, proof.message.split('\n')[0]!, 'ab'.repeat(65)]) {
      assert.ok(!logs.includes(secret), `the log holds ${secret.slice(0, 24)}…`);
    }
  });
});

function pick(res: Record<string, unknown>) {
  const { statusCode, code, param } = res;
  return { statusCode, ...(code === undefined ? {} : { code }), ...(param === undefined ? {} : { param }) };
}
