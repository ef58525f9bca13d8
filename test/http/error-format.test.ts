import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChatHarness } from '../support/chat-harness.ts';
import { errorFormatSuite } from '../support/error-cases.ts';
import { call } from '../support/gateway.ts';

const MESSAGES = [{ role: 'user', content: 'hi' }];
/** Low enough that one test can run a wallet into its limit; each test uses fresh wallets. */
const CHAT_PER_MINUTE = 3;

const chat = (h: ChatHarness, body: unknown, headers: Record<string, string> = {}) => call(h.gw.url, 'POST', '/v1/chat/completions', body, headers);
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

async function invalidJson(h: ChatHarness, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${h.gw.url}${path}`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{"model": ' });
  return { status: res.status, body: await res.json() };
}

interface Answer {
  status: number;
  body: any;
}

/** Asserts the status and OpenAI's nesting with our code, and returns the inner error object. */
function openaiError(res: Answer, status: number, code: string, type: string, param: string | null = null): Record<string, unknown> {
  assert.equal(res.status, status);
  const body = res.body;
  assert.equal(typeof body.error, 'object', JSON.stringify(body));
  assert.equal(body.error.code, code);
  assert.equal(body.error.type, type);
  assert.equal(body.error.param, param);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.equal(body.message, undefined, 'the message lives inside error only');
  return body.error;
}

function specError(res: Answer, status: number, code: string): void {
  assert.equal(res.status, status);
  const body = res.body;
  assert.equal(body.error, code, JSON.stringify(body));
  assert.equal(typeof body.message, 'string');
}

describe('errors.format: openai on the OpenAI-compatible endpoints', () => {
  const harness = errorFormatSuite('openai', CHAT_PER_MINUTE);

  test('400 from validation names the field in param', async () => {
    const h = harness();
    const w = await h.wallet(1_000_000);
    const missing = await chat(h, { messages: MESSAGES }, bearer(w.key));
    openaiError(missing, 400, 'VALIDATION_ERROR', 'invalid_request_error', 'model');
    assert.equal(missing.body.error.message, 'model is required');

    const unknownField = await chat(h, { model: 'chat-small', messages: MESSAGES, best_of: 2 }, bearer(w.key));
    openaiError(unknownField, 400, 'VALIDATION_ERROR', 'invalid_request_error', 'best_of');
    assert.equal(unknownField.body.param, undefined, 'param moves into error, not beside it');
  });

  test('400 for an ambiguous bare model keeps candidates, inside error and at the top level', async () => {
    const h = harness();
    const w = await h.wallet(1_000_000);
    const res = await chat(h, { model: 'shared-name', messages: MESSAGES }, bearer(w.key));
    const inner = openaiError(res, 400, 'VALIDATION_ERROR', 'invalid_request_error', 'model');
    assert.deepEqual(res.body.candidates, ['fake/shared-name', 'other/shared-name']);
    assert.deepEqual(inner.candidates, res.body.candidates);
  });

  test('401 raised in the onRequest hook', async () => {
    const h = harness();
    const missing = await chat(h, { model: 'chat-small', messages: MESSAGES });
    openaiError(missing, 401, 'UNAUTHORIZED', 'authentication_error');
    const wrong = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer('sk-not-a-real-key'));
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error.message, 'invalid or revoked API key');
  });

  test('402 carries balance_usdc and required_usdc inside error and at the top level', async () => {
    const h = harness();
    const poor = await h.wallet(10);
    const res = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key));
    const inner = openaiError(res, 402, 'INSUFFICIENT_BALANCE', 'insufficient_quota');
    assert.match(inner.message as string, /top up with POST \/v1\/topup/);
    assert.equal(res.body.balance_usdc, 10);
    assert.equal(inner.balance_usdc, 10);
    assert.ok(res.body.required_usdc > 10);
    assert.equal(inner.required_usdc, res.body.required_usdc);
  });

  test('429 raised in the onRequest hook keeps Retry-After and the rate-limit headers', async () => {
    const h = harness();
    const poor = await h.wallet(0);
    for (let i = 0; i < CHAT_PER_MINUTE; i++) assert.equal((await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key))).status, 402);
    const res = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key));
    const inner = openaiError(res, 429, 'RATE_LIMITED', 'rate_limit_error');
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
    assert.equal(res.headers.get('x-ratelimit-remaining'), '0');
    assert.equal(typeof res.body.retry_after_ms, 'number');
    assert.equal(inner.retry_after_ms, res.body.retry_after_ms);
  });

  test('502 when the provider fails, nothing charged', async () => {
    const h = harness();
    const w = await h.wallet(1_000_000);
    h.fake.behaviour = { failStatus: 503 };
    const res = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(w.key));
    const inner = openaiError(res, 502, 'UPSTREAM_ERROR', 'api_error');
    assert.match(inner.message as string, /the provider answered 503: injected failure 503; nothing was charged/);
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
  });

  test('framework errors on chat: bad JSON, an oversized body', async () => {
    const h = harness();
    const w = await h.wallet(1_000_000);
    const bad = await invalidJson(h, '/v1/chat/completions', bearer(w.key));
    openaiError(bad, 400, 'VALIDATION_ERROR', 'invalid_request_error');
    const big = await chat(h, { model: 'chat-small', messages: [{ role: 'user', content: 'x'.repeat(h.gw.config.limits.chatBodyBytes) }] }, bearer(w.key));
    openaiError(big, 413, 'PAYLOAD_TOO_LARGE', 'invalid_request_error');
  });

  test('an unknown route, a wrong method on /v1/models and a bad URL use the OpenAI shape', async () => {
    const h = harness();
    const unknown = await call(h.gw.url, 'POST', '/v1/images/generations', { prompt: 'x' });
    openaiError(unknown, 404, 'NOT_FOUND', 'not_found_error');
    const wrongMethod = await call(h.gw.url, 'DELETE', '/v1/models');
    openaiError(wrongMethod, 405, 'METHOD_NOT_ALLOWED', 'invalid_request_error');
    assert.equal(wrongMethod.headers.get('allow'), 'GET');
    const badUrl = await call(h.gw.url, 'GET', '/v1/models/%zz');
    openaiError(badUrl, 400, 'VALIDATION_ERROR', 'invalid_request_error');
  });

  test('the other endpoints keep the spec shape', async () => {
    const h = harness();
    specError(await invalidJson(h, '/v1/auth/keys'), 400, 'VALIDATION_ERROR');
    const wrongMethod = await call(h.gw.url, 'PUT', '/v1/auth/keys/12');
    specError(wrongMethod, 405, 'METHOD_NOT_ALLOWED');
    const usage = await call(h.gw.url, 'GET', '/v1/usage/0x0000000000000000000000000000000000000001');
    specError(usage, 401, 'UNAUTHORIZED');
    const topup = await call(h.gw.url, 'POST', '/v1/topup', { amount: 'ten' });
    specError(topup, 400, 'VALIDATION_ERROR');
  });
});

describe('errors.format: spec (the default) everywhere', () => {
  const harness = errorFormatSuite(undefined, CHAT_PER_MINUTE);

  test('the default config is spec', () => {
    const h = harness();
    assert.equal(h.gw.config.errors.format, 'spec');
  });

  test('400, 401, 402, 429 and 502 on chat, 404 for an unknown model and an unknown route, in the spec shape', async () => {
    const h = harness();
    const w = await h.wallet(1_000_000);
    const invalid = await chat(h, { messages: MESSAGES }, bearer(w.key));
    assert.equal(invalid.status, 400);
    assert.deepEqual(invalid.body, { error: 'VALIDATION_ERROR', message: 'model is required', param: 'model' });

    const anonymous = await chat(h, { model: 'chat-small', messages: MESSAGES });
    specError(anonymous, 401, 'UNAUTHORIZED');

    const poor = await h.wallet(0);
    for (let i = 0; i < CHAT_PER_MINUTE; i++) {
      const res = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key));
      specError(res, 402, 'INSUFFICIENT_BALANCE');
      assert.equal(res.body.balance_usdc, 0);
    }
    const limited = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(poor.key));
    specError(limited, 429, 'RATE_LIMITED');

    h.fake.behaviour = { failStatus: 500 };
    const failed = await chat(h, { model: 'chat-small', messages: MESSAGES }, bearer(w.key));
    specError(failed, 502, 'UPSTREAM_ERROR');

    const unknownModel = await call(h.gw.url, 'GET', '/v1/models/nope/nothing');
    specError(unknownModel, 404, 'NOT_FOUND');
    const unknownRoute = await call(h.gw.url, 'POST', '/v1/images/generations', { prompt: 'x' });
    specError(unknownRoute, 404, 'NOT_FOUND');
  });
});
