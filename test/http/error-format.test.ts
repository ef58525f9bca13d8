import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

const MESSAGES = [{ role: 'user', content: 'hi' }];
/** Low enough that one test can run a wallet into its limit; each test uses fresh wallets. */
const CHAT_PER_MINUTE = 3;

const harness = (format?: 'spec' | 'openai') =>
  startChatHarness('sqlite', {
    ...(format ? { errors: { format } } : {}),
    rateLimits: { chat: { perMinute: CHAT_PER_MINUTE } },
  });

const chat = (h: ChatHarness, body: unknown, headers: Record<string, string> = {}) => call(h.gw.url, 'POST', '/v1/chat/completions', body, headers);
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** Asserts OpenAI's nesting with our code and returns the inner error object. */
function openaiError(body: any, code: string, type: string, param: string | null = null): Record<string, unknown> {
  assert.equal(typeof body.error, 'object', JSON.stringify(body));
  assert.equal(body.error.code, code);
  assert.equal(body.error.type, type);
  assert.equal(body.error.param, param);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.equal(body.message, undefined, 'the message lives inside error only');
  return body.error;
}

function specError(body: any, code: string): void {
  assert.equal(body.error, code, JSON.stringify(body));
  assert.equal(typeof body.message, 'string');
}

describe('errors.format: openai on the OpenAI-compatible endpoints', () => {
  let h: ChatHarness;
  before(async () => {
    h = await harness('openai');
  });
  beforeEach(() => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('400 from validation names the field in param', async () => {
    const w = await h.wallet(1_000_000);
    const missing = await chat(h, { messages: MESSAGES }, bearer(w.key));
    assert.equal(missing.status, 400);
    openaiError(missing.body, 'VALIDATION_ERROR', 'invalid_request_error', 'model');
    assert.equal(missing.body.error.message, 'model is required');

    const unknownField = await chat(h, { model: 'chat-small', messages: MESSAGES, best_of: 2 }, bearer(w.key));
    assert.equal(unknownField.status, 400);
    openaiError(unknownField.body, 'VALIDATION_ERROR', 'invalid_request_error', 'best_of');
    assert.equal(unknownField.body.param, undefined, 'param moves into error, not beside it');
  });

  test('400 for an ambiguous bare model keeps candidates, inside error and at the top level', async () => {
    const w = await h.wallet(1_000_000);
    const res = await chat(h, { model: 'shared-name', messages: MESSAGES }, bearer(w.key));
    assert.equal(res.status, 400);
    const inner = openaiError(res.body, 'VALIDATION_ERROR', 'invalid_request_error', 'model');
    assert.deepEqual(res.body.candidates, ['fake/shared-name', 'other/shared-name']);
    assert.deepEqual(inner.candidates, res.body.candidates);
  });

  test('401 raised in the onRequest hook', async () => {
    const missing = await chat(h, { model: 'chat-small', messages: MESSAGES });
    assert.equal(missing.status, 401);
    openaiError(missing.body, 'UNAUTHORIZED', 'authentication_error');
    const wrong = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer('sk-not-a-real-key'));
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error.message, 'invalid or revoked API key');
  });

  test('402 carries balance_usdc and required_usdc inside error and at the top level', async () => {
    const poor = await h.wallet(10);
    const res = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key));
    assert.equal(res.status, 402);
    const inner = openaiError(res.body, 'INSUFFICIENT_BALANCE', 'insufficient_quota');
    assert.match(inner.message as string, /top up with POST \/v1\/topup/);
    assert.equal(res.body.balance_usdc, 10);
    assert.equal(inner.balance_usdc, 10);
    assert.ok(res.body.required_usdc > 10);
    assert.equal(inner.required_usdc, res.body.required_usdc);
  });

  test('429 raised in the onRequest hook keeps Retry-After and the rate-limit headers', async () => {
    const poor = await h.wallet(0);
    for (let i = 0; i < CHAT_PER_MINUTE; i++) assert.equal((await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key))).status, 402);
    const res = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key));
    assert.equal(res.status, 429);
    const inner = openaiError(res.body, 'RATE_LIMITED', 'rate_limit_error');
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
    assert.equal(res.headers.get('x-ratelimit-remaining'), '0');
    assert.equal(typeof res.body.retry_after_ms, 'number');
    assert.equal(inner.retry_after_ms, res.body.retry_after_ms);
  });

  test('502 when the provider fails, nothing charged', async () => {
    const w = await h.wallet(1_000_000);
    h.fake.behaviour = { failStatus: 503 };
    const res = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(w.key));
    assert.equal(res.status, 502);
    const inner = openaiError(res.body, 'UPSTREAM_ERROR', 'api_error');
    assert.match(inner.message as string, /the provider answered 503: injected failure 503; nothing was charged/);
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
  });

  test('framework errors on chat: bad JSON, an oversized body', async () => {
    const w = await h.wallet(1_000_000);
    const bad = await fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { ...bearer(w.key), 'content-type': 'application/json' }, body: '{"model": ' });
    assert.equal(bad.status, 400);
    openaiError(await bad.json(), 'VALIDATION_ERROR', 'invalid_request_error');
    const big = await chat(h, { model: 'chat-small', messages: [{ role: 'user', content: 'x'.repeat(h.gw.config.limits.chatBodyBytes) }] }, bearer(w.key));
    assert.equal(big.status, 413);
    openaiError(big.body, 'PAYLOAD_TOO_LARGE', 'invalid_request_error');
  });

  test('an unknown route, a wrong method on /v1/models and a bad URL use the OpenAI shape', async () => {
    const unknown = await call(h.gw.url, 'POST', '/v1/embeddings', { input: 'x' });
    assert.equal(unknown.status, 404);
    openaiError(unknown.body, 'NOT_FOUND', 'not_found_error');
    const wrongMethod = await call(h.gw.url, 'DELETE', '/v1/models');
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get('allow'), 'GET');
    openaiError(wrongMethod.body, 'METHOD_NOT_ALLOWED', 'invalid_request_error');
    const badUrl = await call(h.gw.url, 'GET', '/v1/models/%zz');
    assert.equal(badUrl.status, 400);
    openaiError(badUrl.body, 'VALIDATION_ERROR', 'invalid_request_error');
  });

  test('the other endpoints keep the spec shape', async () => {
    const keys = await fetch(`${h.gw.url}/v1/auth/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message": ' });
    assert.equal(keys.status, 400);
    specError(await keys.json(), 'VALIDATION_ERROR');
    const wrongMethod = await call(h.gw.url, 'PATCH', '/v1/auth/keys/12');
    assert.equal(wrongMethod.status, 405);
    specError(wrongMethod.body, 'METHOD_NOT_ALLOWED');
    const usage = await call(h.gw.url, 'GET', '/v1/usage/0x0000000000000000000000000000000000000001');
    assert.equal(usage.status, 401);
    specError(usage.body, 'UNAUTHORIZED');
    const topup = await call(h.gw.url, 'POST', '/v1/topup', { amount: 'ten' });
    assert.ok(topup.status >= 400, String(topup.status));
    specError(topup.body, topup.body.error);
    assert.equal(typeof topup.body.error, 'string');
  });
});

describe('errors.format: spec (the default) everywhere', () => {
  let h: ChatHarness;
  before(async () => {
    h = await harness();
  });
  beforeEach(() => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('the default config is spec', () => {
    assert.equal(h.gw.config.errors.format, 'spec');
  });

  test('400, 401, 402, 429 and 502 on chat, 404 and 405 on /v1/models, in the spec shape', async () => {
    const w = await h.wallet(1_000_000);
    const invalid = await chat(h, { messages: MESSAGES }, bearer(w.key));
    assert.equal(invalid.status, 400);
    assert.deepEqual(invalid.body, { error: 'VALIDATION_ERROR', message: 'model is required', param: 'model' });

    const anonymous = await chat(h, { model: 'chat-small', messages: MESSAGES });
    assert.equal(anonymous.status, 401);
    specError(anonymous.body, 'UNAUTHORIZED');

    const poor = await h.wallet(0);
    for (let i = 0; i < CHAT_PER_MINUTE; i++) {
      const res = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key));
      assert.equal(res.status, 402);
      specError(res.body, 'INSUFFICIENT_BALANCE');
      assert.equal(res.body.balance_usdc, 0);
    }
    const limited = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key));
    assert.equal(limited.status, 429);
    specError(limited.body, 'RATE_LIMITED');

    h.fake.behaviour = { failStatus: 500 };
    const failed = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(w.key));
    assert.equal(failed.status, 502);
    specError(failed.body, 'UPSTREAM_ERROR');

    const unknownModel = await call(h.gw.url, 'GET', '/v1/models/nope/nothing');
    assert.equal(unknownModel.status, 404);
    specError(unknownModel.body, 'NOT_FOUND');
    const unknownRoute = await call(h.gw.url, 'POST', '/v1/embeddings', { input: 'x' });
    assert.equal(unknownRoute.status, 404);
    specError(unknownRoute.body, 'NOT_FOUND');
  });
});
