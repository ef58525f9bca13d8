import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { ANTHROPIC_KEY, CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { siweProof } from '../support/siwe.ts';

const NATIVE = 'anth/claude-test';
const TRANSLATED = 'fake/chat-small';
const HI = [{ role: 'user', content: 'hi' }];
/** A deployment with the balance fit on for every request. */
const CLAUDE_FIT = { ...CLAUDE, name: 'claude-fit', fitMaxTokens: true };
/** A model whose provider has no key configured: 503 PROVIDER_NOT_CONFIGURED. */
const UNCONFIGURED = { provider: 'nokey', name: 'idle', contextLength: 8000, promptCostPer1M: '1', completionCostPer1M: '1' };
/** Each call reports 10 input and 10 output tokens: 12 + 24 = 36 micro-USDC on these models. */
const USAGE = { input_tokens: 10, output_tokens: 10 };
const CHARGE = 36;
const FLOOR = 1000;

/** A POST whose body is always read (an unread body keeps its connection, and the gateway's stop waits for it). */
async function post(url: string, key: string | null, body: unknown, headers: Record<string, string> = {}, path = '/v1/messages') {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}), ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: async () => JSON.parse(text) };
}

describe('/v1/messages for Claude Code: retry headers, betas, count_tokens', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness(
      'sqlite',
      {
        models: [...MODELS, CLAUDE, UNCONFIGURED],
        providers: { nokey: { baseUrl: 'http://127.0.0.1:9/v1', apiKeyEnv: 'TOLLGATE_TEST_UNSET_PROVIDER_KEY' } },
        rateLimits: { chat: { perMinute: 3 } },
      },
      { anthropicBeta: ['prompt-caching-2024-07-31'] },
    );
  });
  beforeEach(() => resetProviders(h, { usage: USAGE }, { usage: { prompt_tokens: 10, completion_tokens: 10 } }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('400, 401, 402, 403 and a configuration 503 say x-should-retry: false; 429 carries Retry-After', async () => {
    const w = await h.wallet(1_000_000);
    const bad = await post(h.gw.url, w.key, { model: NATIVE, messages: HI });
    assert.equal(bad.status, 400);
    assert.equal(bad.headers.get('x-should-retry'), 'false');

    const unauthorized = await post(h.gw.url, 'sk-not-a-real-key', { model: NATIVE, max_tokens: 10, messages: HI });
    assert.equal(unauthorized.status, 401);
    assert.equal(unauthorized.headers.get('x-should-retry'), 'false');

    const poor = await h.wallet(10);
    const unpaid = await post(h.gw.url, poor.key, { model: NATIVE, max_tokens: 10, messages: HI });
    assert.equal(unpaid.status, 402);
    assert.equal(unpaid.headers.get('x-should-retry'), 'false');

    const limited = await h.wallet(1_000_000);
    assert.equal(
      (
        await call(h.gw.url, 'PATCH', `/v1/auth/keys/${limited.keyId}`, {
          ...(await siweProof(limited.account, { action: 'loosen-key' })),
          models: [TRANSLATED],
        })
      ).status,
      200,
    );
    const forbidden = await post(h.gw.url, limited.key, { model: NATIVE, max_tokens: 10, messages: HI });
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.headers.get('x-should-retry'), 'false');

    const idle = await post(h.gw.url, w.key, { model: 'nokey/idle', max_tokens: 10, messages: HI });
    assert.equal(idle.status, 503);
    // A provider without its key is the operator's configuration: retrying cannot help.
    assert.equal(idle.headers.get('retry-after'), null);
    assert.equal(idle.headers.get('x-should-retry'), 'false');

    // The chat limit is 3 a minute: the wallet's fourth request (after the 400, the 503 and this one).
    assert.equal((await post(h.gw.url, w.key, { model: NATIVE, messages: HI })).status, 400);
    const throttled = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 10, messages: HI });
    assert.equal(throttled.status, 429);
    assert.ok(Number(throttled.headers.get('retry-after')) >= 1);
    assert.equal(h.anthropic.received.length, 0);
  });

  test("a native request forwards the client's price-neutral betas merged with the operator's, and names the ones it dropped", async () => {
    const w = await h.wallet(1_000_000);
    const res = await post(
      h.gw.url,
      w.key,
      { model: NATIVE, max_tokens: 10, messages: HI },
      { 'anthropic-beta': 'claude-code-20250219,prompt-caching-2024-07-31,unreviewed-beta-2027-01-01' },
    );
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-tollgate-betas-dropped'), 'unreviewed-beta-2027-01-01');
    const sent = h.anthropic.received[0]!;
    assert.equal(sent.headers['anthropic-beta'], 'prompt-caching-2024-07-31,claude-code-20250219');
    assert.equal(sent.headers['x-api-key'], ANTHROPIC_KEY);
  });

  test('attack: a priced beta (1M context at a higher rate) is refused by name before anything is reserved or sent', async () => {
    const w = await h.wallet(1_000_000);
    const res = await post(
      h.gw.url,
      w.key,
      { model: NATIVE, max_tokens: 10, messages: HI },
      { 'anthropic-beta': 'claude-code-20250219,context-1m-2025-08-07' },
    );
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.equal(body.error.param, 'anthropic-beta');
    assert.match(body.error.message, /context-1m-2025-08-07/);
    assert.equal(h.anthropic.received.length, 0);
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
  });

  test("max_tokens above the model's limit is lowered, said in x-tollgate-max-tokens, and reserved at the lowered value", async () => {
    const w = await h.wallet(1_000_000);
    for (const model of [NATIVE, TRANSLATED]) {
      const res = await post(h.gw.url, w.key, { model, max_tokens: 128_000, messages: HI });
      assert.equal(res.status, 200, model);
      assert.equal(res.headers.get('x-tollgate-max-tokens'), '4096', model);
    }
    assert.equal(h.anthropic.received[0]!.body.max_tokens, 4096);
    assert.equal(h.fake.received[0]!.body.max_tokens, 4096);
  });

  test('count_tokens: answered by the gateway, no provider called, nothing reserved or billed', async () => {
    const w = await h.wallet(1_000_000);
    const body = {
      model: NATIVE,
      system: 'Be brief.',
      messages: [...HI, { role: 'system', content: 'env' }],
      tools: [{ name: 'Bash', description: 'run', input_schema: { type: 'object' } }],
    };
    const res = await post(h.gw.url, w.key, body, {}, '/v1/messages/count_tokens?beta=true');
    assert.equal(res.status, 200);
    const counted = await res.json();
    // The text's count and Anthropic's 346-token tool-use system prompt (the request has tools).
    assert.ok(Number.isInteger(counted.input_tokens) && counted.input_tokens > 356 && counted.input_tokens < 546, JSON.stringify(counted));
    assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
    const translated = await (await post(h.gw.url, w.key, { ...body, model: TRANSLATED }, {}, '/v1/messages/count_tokens')).json();
    assert.ok(translated.input_tokens < counted.input_tokens, 'the Claude margin applies to Anthropic models only');
    assert.equal(h.anthropic.received.length + h.fake.received.length, 0);
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
    const rows = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).execute();
    assert.equal(rows.length, 0);
  });

  test("attack: count_tokens needs a key, checks the body and the key's models, and is rate-limited with chat", async () => {
    assert.equal((await post(h.gw.url, null, { model: NATIVE, messages: HI }, {}, '/v1/messages/count_tokens')).status, 401);
    const w = await h.wallet(0);
    const unknown = await post(h.gw.url, w.key, { model: 'nope', messages: HI }, {}, '/v1/messages/count_tokens');
    assert.equal(unknown.status, 400);
    assert.equal((await unknown.json()).type, 'error');
    assert.equal((await post(h.gw.url, w.key, { model: NATIVE, messages: [] }, {}, '/v1/messages/count_tokens')).status, 400);
    // That was 2 of the wallet's 3 chat requests this minute; one more, then 429 on chat and count alike.
    assert.equal((await post(h.gw.url, w.key, { model: NATIVE, messages: HI }, {}, '/v1/messages/count_tokens')).status, 200);
    const limited = await post(h.gw.url, w.key, { model: NATIVE, messages: HI }, {}, '/v1/messages/count_tokens');
    assert.equal(limited.status, 429);
    assert.equal((await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 10, messages: HI })).status, 429);
  });
});

for (const engine of ENGINES) {
  describe(`attack: the balance fit (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(engine, { models: [...MODELS, CLAUDE, CLAUDE_FIT], chat: { fitMaxTokensFloor: FLOOR } });
    });
    beforeEach(() => resetProviders(h, { usage: USAGE }, { usage: { prompt_tokens: 10, completion_tokens: 10 } }));
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const FIT = { 'x-tollgate-fit-max-tokens': 'true' };
    /** The most the fitted request can cost: its prompt bound (about 100 tokens here) and max_tokens at 2.4. */
    const reservedFor = (maxTokens: number) => 200 * 1.2 + maxTokens * 2.4;

    test('without the opt-in, a balance below the reservation is the usual 402', async () => {
      const w = await h.wallet(5000);
      const res = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 4096, messages: HI });
      assert.equal(res.status, 402);
      assert.equal(h.anthropic.received.length, 0);
    });

    for (const model of [NATIVE, TRANSLATED]) {
      test(`the header lowers max_tokens to what the balance covers and says so (${model})`, async () => {
        const w = await h.wallet(5000);
        const res = await post(h.gw.url, w.key, { model, max_tokens: 4096, messages: HI }, FIT);
        assert.equal(res.status, 200, res.text);
        const fitted = Number(res.headers.get('x-tollgate-max-tokens-fitted'));
        assert.ok(fitted >= FLOOR && fitted < 4096 && reservedFor(fitted) >= 5000 - 300 && fitted * 2.4 <= 5000, `fitted ${fitted}`);
        assert.equal(res.headers.get('x-tollgate-max-tokens'), String(fitted));
        const sent = (model === NATIVE ? h.anthropic.received : h.fake.received)[0]!.body;
        assert.equal(sent.max_tokens, fitted);
        assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), CHARGE);
        assert.equal((await h.balance(w.account)).balance_usdc, 5000 - CHARGE);
      });
    }

    test('a deployment with fitMaxTokens fits without the header; the header "false" turns it off', async () => {
      const w = await h.wallet(5000);
      const on = await post(h.gw.url, w.key, { model: 'anth/claude-fit', max_tokens: 4096, messages: HI });
      assert.equal(on.status, 200);
      assert.ok(Number(on.headers.get('x-tollgate-max-tokens-fitted')) >= FLOOR);
      const off = await post(h.gw.url, w.key, { model: 'anth/claude-fit', max_tokens: 4096, messages: HI }, { 'x-tollgate-fit-max-tokens': 'false' });
      assert.equal(off.status, 402);
    });

    test('attack: the floor is not bypassed: a balance that covers less than the floor is a 402, whatever max_tokens asks', async () => {
      const w = await h.wallet(2000); // about 730 tokens after the prompt bound, below the floor of 1000
      for (const maxTokens of [4096, FLOOR, 900]) {
        const res = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: maxTokens, messages: HI }, FIT);
        assert.equal(res.status, 402, String(maxTokens));
        assert.equal(res.headers.get('x-tollgate-max-tokens-fitted'), null);
        assert.match((await res.json()).error.message, new RegExp(`no further than ${FLOOR}`));
      }
      assert.equal(h.anthropic.received.length, 0);
      assert.equal((await h.balance(w.account)).balance_usdc, 2000);
    });

    test('attack: two fitted requests raced against one balance never reserve more than it holds', async () => {
      const funds = 6000;
      const w = await h.wallet(funds);
      h.anthropic.behaviour = { usage: USAGE, delayMs: 300 };
      const results = await Promise.all([1, 2, 3].map(() => post(h.gw.url, w.key, { model: NATIVE, max_tokens: 4096, messages: HI }, FIT)));
      const ok = results.filter((r) => r.status === 200);
      assert.ok(ok.length >= 1, 'the first is served');
      assert.ok(results.every((r) => r.status === 200 || r.status === 402));
      const fitted = ok.map((r) => Number(r.headers.get('x-tollgate-max-tokens-fitted')));
      assert.ok(fitted.every((f) => f >= FLOOR));
      // Reserved at once, they fit in the balance: each fitted value was reserved against what was left.
      assert.ok(fitted.reduce((sum, f) => sum + f * 2.4, 0) <= funds, `fitted ${fitted.join(', ')}`);
      const balance = await h.balance(w.account);
      assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: funds - ok.length * CHARGE, locked: 0 });
    });

    test('attack: on a key with a spend limit below the balance, the fit is to the smaller of the two', async () => {
      const w = await h.wallet(1_000_000);
      const limit = 4000;
      assert.equal(
        (await call(h.gw.url, 'PATCH', `/v1/auth/keys/${w.keyId}`, { ...(await siweProof(w.account, { action: 'loosen-key' })), spend_limit_usdc: limit }))
          .status,
        200,
      );
      const res = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 4096, messages: HI }, FIT);
      assert.equal(res.status, 200, res.text);
      const fitted = Number(res.headers.get('x-tollgate-max-tokens-fitted'));
      assert.ok(fitted >= FLOOR && fitted * 2.4 <= limit, `fitted ${fitted}`);
      // A key limit below the floor's cost is a 402 naming the key's limit.
      assert.equal(
        (await call(h.gw.url, 'PATCH', `/v1/auth/keys/${w.keyId}`, { ...(await siweProof(w.account, { action: 'loosen-key' })), spend_limit_usdc: 2000 }))
          .status,
        200,
      );
      const refused = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 4096, messages: HI }, FIT);
      assert.equal(refused.status, 402);
      assert.equal((await refused.json()).error.code, 'KEY_LIMIT_EXCEEDED');
    });
  });
}
