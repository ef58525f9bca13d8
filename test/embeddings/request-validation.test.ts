import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import type { ChatHarness } from '../support/chat-harness.ts';
import { EMBED_ID, startEmbeddingsHarness } from '../support/embeddings-harness.ts';
import { MAX_INPUTS, MAX_STRING_BYTES, MAX_TOKEN_ID } from '../../src/embeddings/inputs.ts';
import OpenAI from 'openai';
import { rejection } from '../support/openai-rejection.ts';

const FUNDS = 10_000_000;

describe('embeddings request validation: every bad input is a 400 that says what to send, and costs nothing', () => {
  let h: ChatHarness;
  let w: Awaited<ReturnType<ChatHarness['wallet']>>;
  before(async () => {
    h = await startEmbeddingsHarness('sqlite');
    w = await h.wallet(FUNDS);
  });
  afterEach(async () => {
    // Refused before anything was reserved: no usage row, nothing locked, nothing charged.
    assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
    assert.equal(h.fake.received.length, 0, 'nothing reached the provider');
    await h.gw.assertLedger();
  });
  after(() => h.stop());

  async function post(path: string, body: unknown) {
    const res = await fetch(`${h.gw.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }
  const embed = (body: unknown) => post('/v1/embeddings', body);

  async function refused(body: unknown, message: RegExp | string, param?: string) {
    const res = await embed(body);
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.error, 'VALIDATION_ERROR');
    if (typeof message === 'string') assert.equal(res.body.message, message);
    else assert.match(res.body.message, message);
    if (param !== undefined) assert.equal(res.body.param, param);
  }

  test('the body, model and fields', async () => {
    await refused({}, 'model and input are required', 'model');
    await refused({ model: EMBED_ID }, 'input is required', 'input');
    await refused({ input: 'hi' }, 'model is required', 'model');
    await refused({ model: 5, input: 'hi' }, /^model must be a string/, 'model');
    await refused({ model: 'nope/none', input: 'hi' }, /^unknown model "nope\/none"/, 'model');
    await refused(
      { model: EMBED_ID, input: 'hi', temperature: 1 },
      /^Unrecognized request argument supplied: temperature; an embeddings request takes model, input, encoding_format, dimensions, user$/,
      'temperature',
    );
    await refused([{ model: EMBED_ID }], /^request body must be a JSON object/);
  });

  test('input: shapes, emptiness, depth and mixing', async () => {
    const cases: [unknown, RegExp, string][] = [
      [42, /^input must be a string, an array of strings, an array of token ids, or an array of token-id arrays$/, 'input'],
      [{ text: 'hi' }, /^input must be a string/, 'input'],
      ['', /^input is an empty string; every input must have some text$/, 'input'],
      [[], /^input is an empty array; send at least one string or token array$/, 'input'],
      [['fine', ''], /^input\[1\] is an empty string/, 'input[1]'],
      [['fine', 7], /^input\[1\] must be a string like the first item: input is .*, not a mix$/, 'input[1]'],
      [[[1, 2], 'text'], /^input\[1\] must be an array of token ids like the first item/, 'input[1]'],
      [[[]], /^input\[0\] is an empty token array/, 'input[0]'],
      [[[1, 2], []], /^input\[1\] is an empty token array/, 'input[1]'],
      [[[1, [2]]], /^input\[0\]\[1\] is an array: token arrays nest one level only/, 'input[0]'],
      [[[[1]]], /^input\[0\]\[0\] is an array: token arrays nest one level only/, 'input[0]'],
      [[null], /^input\[0\] must be an array of token ids like the first item/, 'input[0]'],
      [[['a']], /^input\[0\]\[0\] must be a token id, a whole number from 0 to 2147483647$/, 'input[0]'],
    ];
    for (const [input, message, param] of cases) await refused({ model: EMBED_ID, input }, message, param);
  });

  test('token ids: whole numbers in range', async () => {
    await refused({ model: EMBED_ID, input: [1, 2.5] }, `input[1] must be a token id, a whole number from 0 to ${MAX_TOKEN_ID}`, 'input');
    await refused({ model: EMBED_ID, input: [-1] }, /^input\[0\] must be a token id/, 'input');
    await refused({ model: EMBED_ID, input: [[5], [MAX_TOKEN_ID + 1]] }, /^input\[1\]\[0\] must be a token id/, 'input[1]');
  });

  test('sizes: the number of inputs, a string, a token array against the model window', async () => {
    await refused(
      { model: EMBED_ID, input: Array.from({ length: MAX_INPUTS + 1 }, () => 'x') },
      `input has ${MAX_INPUTS + 1} items; send at most ${MAX_INPUTS} per request and split the rest into more requests`,
      'input',
    );
    await refused(
      { model: EMBED_ID, input: ['ok', 'y'.repeat(MAX_STRING_BYTES + 1)] },
      `input[1] is ${MAX_STRING_BYTES + 1} bytes, above the ${MAX_STRING_BYTES} a string input may have; split it into shorter inputs`,
      'input[1]',
    );
    // Counted exactly: 8192 ids is one over the model's 8191.
    await refused(
      { model: EMBED_ID, input: Array.from({ length: 8192 }, () => 1) },
      `input has 8192 tokens, above ${EMBED_ID}'s limit of 8191 per input; split it`,
      'input',
    );
    await refused({ model: EMBED_ID, input: [[1], Array.from({ length: 8192 }, () => 1)] }, /^input\[1\] has 8192 tokens/, 'input[1]');
  });

  test('encoding_format, dimensions and user', async () => {
    for (const encoding_format of ['int8', 'FLOAT', 5])
      await refused({ model: EMBED_ID, input: 'hi', encoding_format }, 'encoding_format must be "float" or "base64"', 'encoding_format');
    for (const dimensions of [0, -3, 1.5, '256', null]) {
      if (dimensions === null) continue;
      await refused({ model: EMBED_ID, input: 'hi', dimensions }, 'dimensions must be a positive whole number, such as 256', 'dimensions');
    }
    await refused({ model: EMBED_ID, input: 'hi', user: 42 }, /^user must be a string/, 'user');
  });

  test('a chat model on /v1/embeddings names the chat endpoints', async () => {
    await refused(
      { model: 'chat-small', input: 'hi' },
      'model fake/chat-small is a chat model; send it to POST /v1/chat/completions (or /v1/responses, /v1/messages)',
      'model',
    );
  });

  test('an embedding model on chat completions, Responses, Messages and count_tokens names /v1/embeddings', async () => {
    const said = 'model fake/embed-small is an embedding model; send it to POST /v1/embeddings';
    const chat = await post('/v1/chat/completions', { model: EMBED_ID, messages: [{ role: 'user', content: 'hi' }] });
    assert.deepEqual([chat.status, chat.body.message], [400, said]);
    const responses = await post('/v1/responses', { model: 'embed-small', input: 'hi' });
    assert.equal(responses.status, 400);
    assert.equal(JSON.stringify(responses.body).includes(said), true, JSON.stringify(responses.body));
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      const res = await post(path, { model: EMBED_ID, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(res.status, 400, path);
      assert.equal(JSON.stringify(res.body).includes(said), true, `${path}: ${JSON.stringify(res.body)}`);
    }
  });
});

describe('errors.format: openai on /v1/embeddings: the openai SDK reads the message and param', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startEmbeddingsHarness('sqlite', { errors: { format: 'openai' } });
  });
  after(() => h.stop());

  test('a bad input is a BadRequestError with the message and param; a chat model names the chat endpoint', async () => {
    const w = await h.wallet(1_000);
    const client = h.client(w.key);
    const empty = await rejection(client.embeddings.create({ model: EMBED_ID, input: ['ok', ''] }));
    assert.ok(empty instanceof OpenAI.BadRequestError);
    assert.equal(empty.message, '400 input[1] is an empty string; every input must have some text');
    assert.equal(empty.param, 'input[1]');
    const chat = await rejection(client.embeddings.create({ model: 'chat-small', input: 'hi' }));
    assert.match(chat.message, /is a chat model; send it to POST \/v1\/chat\/completions/);
    const poor = await rejection(client.embeddings.create({ model: EMBED_ID, input: 'x'.repeat(200) }));
    assert.equal(poor.status, 402);
    assert.match(poor.message, /send fewer or shorter inputs$/);
    assert.deepEqual(await h.balance(w.account), { balance_usdc: 1_000, locked_usdc: 0, available_usdc: 1_000 });
    await h.gw.assertLedger();
  });
});

describe("embeddings count against the wallet's chat rate limit", () => {
  let h: ChatHarness;
  before(async () => {
    h = await startEmbeddingsHarness('sqlite', { rateLimits: { chat: { perMinute: 2, perDay: 1_000 } } });
  });
  after(() => h.stop());

  test('one window for chat and embeddings: the third request in the minute is a 429 before its body is read, and costs nothing', async () => {
    const w = await h.wallet(1_000_000);
    const embed = () =>
      fetch(`${h.gw.url}/v1/embeddings`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: EMBED_ID, input: 'hi' }),
      });
    assert.equal((await embed()).status, 200);
    const chat = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }),
    });
    assert.equal(chat.status, 200);
    const limited = await embed();
    assert.equal(limited.status, 429);
    assert.ok(limited.headers.get('retry-after'));
    const rows = await h.gw.services.storage.db.selectFrom('request_usage').select('model').where('api_key_id', '=', w.keyId).execute();
    assert.deepEqual(rows.map((r) => r.model).sort(), ['fake/chat-small', EMBED_ID]);
    await h.gw.assertLedger();
  });
});
