import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import OpenAI from 'openai';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { createKeyProof, newAccount, proofQuery, siweProof } from '../support/siwe.ts';

/** A chat completion sent as a plain HTTP client would, with the key as Bearer. */
const postChat = (h: ChatHarness, key: string, body: unknown) => call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${key}` });

/**
 * The spec's stated behaviour (the specification the product was created from, kept beside the project), checked statement by statement on the
 * default configuration: only the catalog (which the spec leaves to the deployment) is configured.
 */
const pick = (b: { balance_usdc: number; locked_usdc: number }) => ({ balance_usdc: b.balance_usdc, locked_usdc: b.locked_usdc });
const isInt = (v: unknown) => Number.isInteger(v);
const errorShape = (body: any, code: string) => {
  assert.equal(body.error, code, JSON.stringify(body));
  assert.equal(typeof body.message, 'string', JSON.stringify(body));
};

for (const engine of ENGINES) {
  describe(`spec floor: resources, endpoints, errors (default configuration, ${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine);
    });
    beforeEach(() => {
      h.fake.behaviour = { content: 'hello there' };
      h.fake.received.length = 0;
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    test('4.1 GET /health: no auth, {status: "ok"}', async () => {
      const res = await call(h.gw.url, 'GET', '/health');
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'ok');
    });

    test('4.2 / 2.3 GET /v1/models: no auth, {object: "list", data: [entries]} with the typed fields', async () => {
      const res = await call(h.gw.url, 'GET', '/v1/models');
      assert.equal(res.status, 200);
      assert.equal(res.body.object, 'list');
      assert.ok(Array.isArray(res.body.data) && res.body.data.length > 0);
      for (const m of res.body.data) {
        assert.equal(typeof m.id, 'string');
        assert.equal(m.id, `${m.provider}/${m.name}`);
        assert.equal(typeof m.name, 'string');
        assert.equal(typeof m.provider, 'string');
        assert.ok(isInt(m.contextLength), JSON.stringify(m));
        assert.equal(typeof m.promptPricePer1MTokens, 'number');
        assert.equal(typeof m.completionPricePer1M, 'number');
      }
      const sdk = await new OpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: 'unused', maxRetries: 0 }).models.list();
      assert.ok(sdk.data.length > 0);
    });

    test('4.4 / 2.2 / 3.1 create: {id, key, label, created_at}; label optional; key sk-...', async () => {
      const account = newAccount();
      const res = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
      assert.ok(res.status === 200 || res.status === 201, res.text);
      assert.deepEqual(Object.keys(res.body).sort(), ['created_at', 'id', 'key', 'label']);
      assert.ok(isInt(res.body.id));
      assert.match(res.body.key, /^sk-/);
      assert.equal(typeof res.body.label, 'string');
      assert.match(res.body.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    });

    test('4.5 / 4.6 / 3.1 list omits the secret and carries revoked_at; revoke answers {revoked: true}', async () => {
      const account = newAccount();
      const created = (await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), label: 'L' })).body;
      const list = await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(await siweProof(account))}`);
      assert.equal(list.status, 200, list.text);
      const entry = list.body.data.find((k: any) => k.id === created.id);
      assert.equal(entry.label, 'L');
      assert.equal(entry.created_at, created.created_at);
      assert.equal(entry.revoked_at, null);
      assert.ok(!('key' in entry));
      const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${created.id}`, await siweProof(account));
      assert.equal(revoked.status, 200, revoked.text);
      assert.deepEqual(revoked.body, { revoked: true });
      const after = await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(await siweProof(account))}`);
      assert.equal(typeof after.body.data.find((k: any) => k.id === created.id).revoked_at, 'string');
    });

    test('5 rule 1: missing, expired or invalid SIWE is 401 UNAUTHORIZED on create, list, revoke, usage', async () => {
      const account = newAccount();
      const old = new Date(Date.now() - 24 * 3600_000);
      const expired = await createKeyProof(account, { issuedAt: old, expirationTime: new Date(Date.now() - 3600_000) });
      const invalid = { ...(await createKeyProof(account)), signature: `0x${'11'.repeat(65)}` };
      for (const body of [{}, expired, invalid]) {
        const res = await call(h.gw.url, 'POST', '/v1/auth/keys', body);
        assert.equal(res.status, 401, `create ${res.text}`);
        errorShape(res.body, 'UNAUTHORIZED');
      }
      for (const res of [
        await call(h.gw.url, 'GET', '/v1/auth/keys'),
        await call(
          h.gw.url,
          'GET',
          `/v1/auth/keys?${proofQuery(await siweProof(account, { issuedAt: old, expirationTime: new Date(Date.now() - 3600_000) }))}`,
        ),
        await call(h.gw.url, 'DELETE', '/v1/auth/keys/1', { message: 'x', signature: '0x00' }),
        await call(h.gw.url, 'GET', `/v1/usage/${account.address}`),
        await call(h.gw.url, 'GET', `/v1/usage/${account.address}?${proofQuery({ ...(await siweProof(account)), signature: `0x${'11'.repeat(65)}` })}`),
      ]) {
        assert.equal(res.status, 401, res.text);
        errorShape(res.body, 'UNAUTHORIZED');
      }
    });

    test('5 rule 1 / 7: a missing or invalid API key on chat is 401 UNAUTHORIZED', async () => {
      for (const headers of [{}, { authorization: 'Bearer sk-not-a-real-key' }] as Record<string, string>[]) {
        const res = await call(h.gw.url, 'POST', '/v1/chat/completions', { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }, headers);
        assert.equal(res.status, 401, res.text);
        errorShape(res.body, 'UNAUTHORIZED');
      }
    });

    test('4.7 / 2.6 non-streaming chat with the openai SDK: the response object; default max_tokens 1024 sent upstream', async () => {
      const { key } = await h.wallet(10_000_000);
      const r = await h.client(key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(typeof r.id, 'string');
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.choices[0]!.index, 0);
      assert.equal(r.choices[0]!.message.role, 'assistant');
      assert.equal(r.choices[0]!.message.content, 'hello there');
      assert.equal(typeof r.choices[0]!.finish_reason, 'string');
      assert.ok(isInt(r.usage!.prompt_tokens) && isInt(r.usage!.completion_tokens));
      assert.equal(r.usage!.total_tokens, r.usage!.prompt_tokens + r.usage!.completion_tokens);
      const upstream = h.fake.received.at(-1)!.body as any;
      assert.equal(upstream.max_tokens ?? upstream.max_completion_tokens, 1024);
    });

    test('4.7 bare model name is accepted; the forwarded fields reach the provider', async () => {
      const { key } = await h.wallet(10_000_000);
      const r = await h.client(key).chat.completions.create({
        model: 'chat-small',
        messages: [{ role: 'user', content: 'hi' }],
        temperature: 0.5,
        top_p: 0.9,
        stop: ['x'],
        presence_penalty: 0.1,
        frequency_penalty: 0.1,
        response_format: { type: 'text' },
        seed: 7,
        n: 1,
        logprobs: false,
        max_tokens: 50,
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
        tool_choice: 'auto',
      });
      assert.equal(r.object, 'chat.completion');
      const upstream = h.fake.received.at(-1)!.body as any;
      for (const f of [
        'temperature',
        'top_p',
        'stop',
        'presence_penalty',
        'frequency_penalty',
        'response_format',
        'seed',
        'n',
        'logprobs',
        'tools',
        'tool_choice',
      ])
        assert.ok(f in upstream, `${f} forwarded`);
    });

    test('4.7: the forwarded standard fields with non-default values reach an OpenAI-compatible provider as sent', async () => {
      const { key } = await h.wallet(10_000_000);
      const fields = {
        stop: 'END',
        presence_penalty: 1.5,
        frequency_penalty: -0.5,
        response_format: { type: 'json_object' },
        seed: 42,
        n: 2,
        logprobs: true,
        temperature: 1.7,
        top_p: 0.3,
        tool_choice: { type: 'function', function: { name: 'f' } },
        tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object', properties: { a: { type: 'string' } } } } }],
      };
      h.fake.received.length = 0;
      const res = await postChat(h, key, { model: 'fake/chat-small', messages: [{ role: 'user', content: 'json please' }], max_tokens: 64, ...fields });
      assert.equal(res.status, 200, res.text);
      const upstream = h.fake.received.at(-1)!.body as any;
      for (const [name, value] of Object.entries(fields)) assert.deepEqual(upstream[name], value, name);
    });

    test('4.7 (reasoning forward, the default): a model of no reasoning family gets thinking and reasoning_effort as they are', async () => {
      const { key } = await h.wallet(10_000_000);
      for (const fields of [{ reasoning_effort: 'max' }, { reasoning_effort: 3 }, { thinking: { type: 'adaptive' }, reasoning_effort: 'auto' }]) {
        h.fake.received.length = 0;
        const res = await postChat(h, key, { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], ...fields });
        assert.equal(res.status, 200, `${JSON.stringify(fields)}: ${res.text}`);
        const upstream = h.fake.received.at(-1)!.body as any;
        for (const [name, value] of Object.entries(fields)) assert.deepEqual(upstream[name], value, name);
      }
    });

    test('7: missing model and messages give 400 VALIDATION_ERROR naming both', async () => {
      const { key } = await h.wallet(10_000_000);
      const res = await postChat(h, key, {});
      assert.equal(res.status, 400, res.text);
      errorShape(res.body, 'VALIDATION_ERROR');
      assert.match(res.body.message, /model/);
      assert.match(res.body.message, /messages/);
    });

    test('3.2 / 7: unknown model is 400 VALIDATION_ERROR, nothing locked or deducted', async () => {
      const { key, account } = await h.wallet(10_000_000);
      const res = await postChat(h, key, { model: 'fake/nope', messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(res.status, 400, res.text);
      errorShape(res.body, 'VALIDATION_ERROR');
      assert.deepEqual(pick(await h.balance(account)), { balance_usdc: 10_000_000, locked_usdc: 0 });
      const sdkErr = await h
        .client(key)
        .chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] })
        .catch((e) => e);
      assert.equal(sdkErr.status, 400);
    });

    test('3.2 / 7: insufficient balance is 402 INSUFFICIENT_BALANCE whose message points to POST /v1/topup; no lock', async () => {
      const { key, account } = await h.wallet(0);
      for (const stream of [false, true]) {
        const res = await postChat(h, key, { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream });
        assert.equal(res.status, 402, res.text);
        errorShape(res.body, 'INSUFFICIENT_BALANCE');
        assert.match(res.body.message, /POST \/v1\/topup/);
      }
      assert.deepEqual(pick(await h.balance(account)), { balance_usdc: 0, locked_usdc: 0 });
      assert.equal(h.fake.received.length, 0);
    });

    test('3.2 / 7: provider down or failing (non-streaming) is 502 UPSTREAM_ERROR, lock released, no charge', async () => {
      const { key, account } = await h.wallet(10_000_000);
      for (const behaviour of [{ failStatus: 500 }, { dropConnection: true }]) {
        h.fake.behaviour = behaviour;
        const res = await postChat(h, key, { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
        assert.equal(res.status, 502, res.text);
        errorShape(res.body, 'UPSTREAM_ERROR');
        assert.deepEqual(pick(await h.balance(account)), { balance_usdc: 10_000_000, locked_usdc: 0 });
      }
    });

    test('3.2 / 7: a provider that answers 200 with an error body or no answer at all failed: 502 UPSTREAM_ERROR, nothing charged', async () => {
      const { key, account } = await h.wallet(10_000_000);
      for (const body of ['{"error":{"message":"overloaded","type":"server_error","code":503}}', '{}', '[]', 'null']) {
        h.fake.behaviour = { content: 'x', rewriteAnswer: () => body };
        const res = await postChat(h, key, { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
        assert.equal(res.status, 502, `${body}: ${res.status} ${res.text}`);
        errorShape(res.body, 'UPSTREAM_ERROR');
        assert.deepEqual(pick(await h.balance(account)), { balance_usdc: 10_000_000, locked_usdc: 0 });
      }
    });

    test('4.8 / 2.1 / 2.4 usage with an API key and with SIWE: the typed fields', async () => {
      const { key, account, keyId } = await h.wallet(10_000_000);
      await h.client(key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
      const byKey = await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${key}` });
      const bySiwe = await call(h.gw.url, 'GET', `/v1/usage/${account.address}?${proofQuery(await siweProof(account))}`);
      for (const res of [byKey, bySiwe]) {
        assert.equal(res.status, 200, res.text);
        const b = res.body;
        assert.equal(typeof b.wallet, 'string');
        assert.equal(b.wallet.toLowerCase(), account.address.toLowerCase());
        for (const f of ['balance_usdc', 'locked_usdc', 'available_usdc']) assert.ok(isInt(b[f]), f);
        assert.equal(b.available_usdc, b.balance_usdc - b.locked_usdc);
        const k = b.keys.find((e: any) => e.api_key_id === keyId);
        assert.ok(k, JSON.stringify(b.keys));
        assert.equal(typeof k.label, 'string');
        for (const f of ['request_count', 'total_prompt_tokens', 'total_completion_tokens', 'total_charged_usdc']) assert.ok(isInt(k[f]), `${f}: ${k[f]}`);
        assert.equal(k.request_count, 1);
        assert.equal(typeof k.total_platform_revenue_usd, 'number');
        assert.equal(b.balance_usdc, 10_000_000 - k.total_charged_usdc);
      }
    });

    test('7: an unknown resource is 404 NOT_FOUND in the standard shape', async () => {
      const res = await call(h.gw.url, 'GET', '/v1/nothing-here');
      assert.equal(res.status, 404, res.text);
      errorShape(res.body, 'NOT_FOUND');
    });
  });
}

describe('spec floor: in-flight lock, unknown wallet, unknown routes (default configuration)', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('3.2: while a request runs its reservation is locked (locked_usdc rises, available = balance - locked), released after', async () => {
    h.fake.behaviour = { content: 'slow answer', delayMs: 800 };
    const { key, account } = await h.wallet(10_000_000);
    const running = h.client(key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    await new Promise((r) => setTimeout(r, 300));
    const mid = await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${key}` });
    assert.equal(mid.status, 200, mid.text);
    assert.ok(mid.body.locked_usdc > 0, JSON.stringify(mid.body));
    assert.equal(mid.body.available_usdc, mid.body.balance_usdc - mid.body.locked_usdc);
    await running;
    const done = await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${key}` });
    assert.equal(done.body.locked_usdc, 0);
  });

  test("3.2 / 7: a 402 while the wallet's own requests in flight hold the funds still points to POST /v1/topup", async () => {
    // chat-small reserves about 2,500 micro-USDC for this prompt and the default 1024 tokens: the
    // balance covers one such request, not two at once.
    h.fake.behaviour = { content: 'slow answer', delayMs: 800 };
    const { key, account } = await h.wallet(4_000);
    const first = h.client(key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    await new Promise((r) => setTimeout(r, 300));
    const held = await h.balance(account);
    assert.ok(held.locked_usdc > 0 && held.balance_usdc - held.locked_usdc < held.locked_usdc, JSON.stringify(held));
    const res = await postChat(h, key, { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.status, 402, res.text);
    errorShape(res.body, 'INSUFFICIENT_BALANCE');
    assert.match(res.body.message, /POST \/v1\/topup/);
    await first;
  });

  test('8 / 2.3: a request is billed at the prices /v1/models lists (USD per 1M tokens = micro-USDC per token)', async () => {
    h.fake.behaviour = { content: 'priced', usage: { prompt_tokens: 1000, completion_tokens: 500 } };
    const listed = (await call(h.gw.url, 'GET', '/v1/models')).body.data.find((m: any) => m.id === 'fake/chat-small');
    const { key, account } = await h.wallet(10_000_000);
    await h.client(key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    const charged = 10_000_000 - (await h.balance(account)).balance_usdc;
    assert.equal(charged, Math.ceil(1000 * listed.promptPricePer1MTokens + 500 * listed.completionPricePer1M));
  });

  test('4.8: an unknown wallet read by its own SIWE proof has zero balances and no keys', async () => {
    const account = newAccount();
    const res = await call(h.gw.url, 'GET', `/v1/usage/${account.address}?${proofQuery(await siweProof(account))}`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.balance_usdc, 0);
    assert.equal(res.body.locked_usdc, 0);
    assert.equal(res.body.available_usdc, 0);
    assert.deepEqual(res.body.keys, []);
  });

  test("4.8 / 5: another wallet's key or proof on a usage read is 401 UNAUTHORIZED", async () => {
    const mine = await h.wallet(0);
    const theirs = await h.wallet(0);
    const byKey = await call(h.gw.url, 'GET', `/v1/usage/${mine.account.address}`, undefined, { authorization: `Bearer ${theirs.key}` });
    assert.equal(byKey.status, 401, byKey.text);
    errorShape(byKey.body, 'UNAUTHORIZED');
    const byProof = await call(h.gw.url, 'GET', `/v1/usage/${mine.account.address}?${proofQuery(await siweProof(theirs.account))}`);
    assert.equal(byProof.status, 401, byProof.text);
    errorShape(byProof.body, 'UNAUTHORIZED');
  });

  test('7: 404 NOT_FOUND in the standard shape for an unknown key id and unknown paths', async () => {
    const { account } = await h.wallet(0);
    const res = await call(h.gw.url, 'DELETE', '/v1/auth/keys/99999999', await siweProof(account));
    assert.equal(res.status, 404, res.text);
    errorShape(res.body, 'NOT_FOUND');
    for (const [method, path] of [
      ['POST', '/v1/completions'],
      ['GET', '/v1/usage'],
      ['GET', '/v2/models'],
    ] as const) {
      const r = await call(h.gw.url, method, path, method === 'POST' ? {} : undefined);
      assert.equal(r.status, 404, `${method} ${path}: ${r.text}`);
      errorShape(r.body, 'NOT_FOUND');
    }
  });

  test('7: a malformed chat body is 400 VALIDATION_ERROR in the standard shape', async () => {
    const { key } = await h.wallet(1_000_000);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: '{"model":',
    });
    const body = await res.json();
    assert.equal(res.status, 400);
    errorShape(body, 'VALIDATION_ERROR');
  });

  test('4.4: ref_code with redeem_code is 400 VALIDATION_ERROR and no key is created', async () => {
    const account = newAccount();
    const res = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), ref_code: 'abc', redeem_code: 'def' });
    assert.equal(res.status, 400, res.text);
    errorShape(res.body, 'VALIDATION_ERROR');
    const list = await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(await siweProof(account))}`);
    assert.deepEqual(list.body.data, []);
  });
});

describe('spec floor: the per-wallet rate limit (chat limit lowered to 3 a minute, the rest default)', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { rateLimits: { chat: { perMinute: 3 } } });
    h.fake.behaviour = { content: 'ok' };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('8 / 7: per-wallet limit exceeded is 429 RATE_LIMITED (message: rate limit exceeded), nothing deducted', async () => {
    const { key, account } = await h.wallet(10_000_000);
    for (let i = 0; i < 3; i++) await h.client(key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    const before = pick(await h.balance(account));
    const sent = h.fake.received.length;
    const res = await postChat(h, key, { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.status, 429, res.text);
    errorShape(res.body, 'RATE_LIMITED');
    assert.match(res.body.message, /rate limit exceeded/i);
    assert.deepEqual(pick(await h.balance(account)), before);
    assert.equal(h.fake.received.length, sent);
    // Per wallet: a second key of the same wallet is limited too, and a stream gets a plain 429.
    const second = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
    const other = await call(
      h.gw.url,
      'POST',
      '/v1/chat/completions',
      { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true },
      { authorization: `Bearer ${second.body.key}` },
    );
    assert.equal(other.status, 429, other.text);
    errorShape(other.body, 'RATE_LIMITED');
    assert.equal(h.fake.received.length, sent);
  });
});
