import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startChatHarness, readSse, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

/** chat-small bills 1.2 micro-USDC per prompt token and 2.4 per completion token. */
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 100 * 1.2 + 50 * 2.4; // 240, exact

describe('chat completions through the official openai SDK', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', {}, { env: { FAKE_KEY: 'sk-upstream-secret-abcdef' } });
  });
  beforeEach(() => {
    h.fake.behaviour = { usage: USAGE };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('non-streaming: the provider response passes through, the charge is exact and reported', async () => {
    const w = await h.wallet(1_000_000);
    const { data, response } = await h
      .client(w.key)
      .chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'Say hello' }] })
      .withResponse();
    assert.equal(data.object, 'chat.completion');
    assert.equal(data.choices[0]!.message.content, 'Hello from the fake provider, a stand-in for a paid model.');
    assert.equal(data.choices[0]!.finish_reason, 'stop');
    assert.deepEqual({ p: data.usage?.prompt_tokens, c: data.usage?.completion_tokens, t: data.usage?.total_tokens }, { p: 100, c: 50, t: 150 });
    assert.equal((data as any).system_fingerprint, 'fp_fake', 'fields beyond the spec pass through');
    assert.equal(response.headers.get('x-tollgate-charged-usdc'), String(CHARGE));
    assert.equal(response.headers.get('x-tollgate-balance-usdc'), String(1_000_000 - CHARGE));
    assert.match(response.headers.get('x-ratelimit-remaining') ?? '', /^\d+$/);
    assert.deepEqual(await h.balance(w.account), { balance_usdc: 1_000_000 - CHARGE, locked_usdc: 0, available_usdc: 1_000_000 - CHARGE });

    const sent = h.fake.received.at(-1)!;
    assert.equal(sent.body.model, 'chat-small', 'the upstream gets its own model name');
    assert.equal(sent.body.max_tokens, 1024, 'the default max_tokens is sent explicitly');
    assert.equal(sent.headers.authorization, 'Bearer sk-upstream-secret-abcdef', 'the provider key comes from the environment');
    assert.equal(sent.headers['x-client-request-id'], response.headers.get('x-request-id'), 'the provider sees our request id');
    assert.ok(!h.gw.logs().includes('sk-upstream-secret-abcdef'));
  });

  test('every standard field is forwarded as sent', async () => {
    const w = await h.wallet(1_000_000);
    const fields = {
      temperature: 0.3,
      top_p: 0.9,
      stop: ['\n\n'],
      presence_penalty: 0.5,
      frequency_penalty: 0.25,
      seed: 42,
      n: 2,
      logprobs: true,
      response_format: { type: 'json_object' as const },
      user: 'end-user-7',
      max_tokens: 64,
      tools: [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      tool_choice: 'auto' as const,
    };
    await h.client(w.key).chat.completions.create({
      model: 'chat-small',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
      ...fields,
    });
    const sent = h.fake.received.at(-1)!.body;
    for (const [k, v] of Object.entries(fields)) assert.deepEqual(sent[k], v, k);
    assert.deepEqual(sent.messages, [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
    ]);
  });

  test('streaming without include_usage: text arrives, no usage chunk, still billed', async () => {
    const w = await h.wallet(1_000_000);
    const stream = await h.client(w.key).chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true });
    let text = '';
    let sawUsage = false;
    let sawRole = false;
    let finish: string | null = null;
    for await (const chunk of stream) {
      if (chunk.usage) sawUsage = true;
      const choice = chunk.choices[0];
      if (choice?.delta?.role === 'assistant') sawRole = true;
      text += choice?.delta?.content ?? '';
      finish = choice?.finish_reason ?? finish;
    }
    assert.equal(text, 'Hello from the fake provider, a stand-in for a paid model.');
    assert.ok(sawRole, 'the role chunk passes through');
    assert.equal(finish, 'stop');
    assert.equal(sawUsage, false);
    assert.equal(h.fake.received.at(-1)!.body.stream_options.include_usage, true, 'usage is always requested upstream');
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000 - CHARGE);
  });

  test('streaming with include_usage: the usage chunk reaches the client', async () => {
    const w = await h.wallet(1_000_000);
    const stream = await h
      .client(w.key)
      .chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
    assert.equal(usage?.prompt_tokens, 100);
    assert.equal(usage?.completion_tokens, 50);
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000 - CHARGE);
  });

  test('the raw stream: SSE headers, faithful chunks, and data: [DONE] last', async () => {
    const w = await h.wallet(1_000_000);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    assert.match(res.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    const events = await readSse(res);
    assert.equal(events.at(-1), '[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id));
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '', refusal: null });
  });

  test('tool calls, not streamed', async () => {
    const w = await h.wallet(1_000_000);
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'get_weather', arguments: '{"city":"Lisbon","unit":"celsius"}' } };
    const res = await h.client(w.key).chat.completions.create({
      model: 'chat-small',
      messages: [{ role: 'user', content: 'weather?' }],
      tools: [{ type: 'function', function: { name: 'get_weather' } }],
    });
    const call0 = res.choices[0]!.message.tool_calls![0]!;
    assert.equal(res.choices[0]!.finish_reason, 'tool_calls');
    assert.equal(call0.type === 'function' && call0.function.name, 'get_weather');
    assert.equal(call0.type === 'function' && call0.function.arguments, '{"city":"Lisbon","unit":"celsius"}');
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000 - CHARGE);
  });

  test('tool calls, streamed: deltas keep their index and assemble into the call', async () => {
    const w = await h.wallet(1_000_000);
    h.fake.behaviour = { usage: USAGE, toolCall: { name: 'get_weather', arguments: '{"city":"Lisbon","unit":"celsius"}' } };
    const runner = h.client(w.key).chat.completions.stream({
      model: 'chat-small',
      messages: [{ role: 'user', content: 'weather?' }],
      tools: [{ type: 'function', function: { name: 'get_weather' } }],
    });
    const deltas: any[] = [];
    runner.on('chunk', (c) => deltas.push(...(c.choices[0]?.delta?.tool_calls ?? [])));
    const final = await runner.finalChatCompletion();
    const tc = final.choices[0]!.message.tool_calls![0]!;
    assert.equal(tc.type === 'function' && tc.function.arguments, '{"city":"Lisbon","unit":"celsius"}');
    assert.equal(final.choices[0]!.finish_reason, 'tool_calls');
    assert.ok(deltas.length > 2 && deltas.every((d) => d.index === 0), 'every tool-call delta carries index 0');
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000 - CHARGE);
  });

  test("402, 429 and 502 surface as the SDK's typed errors", async () => {
    const poor = await h.wallet(10);
    await assert.rejects(h.client(poor.key).chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.APIError);
      assert.equal(err.status, 402);
      assert.equal(err.error, 'INSUFFICIENT_BALANCE', 'the SDK exposes the spec error code as err.error');
      assert.match(err.message, /^402 "INSUFFICIENT_BALANCE"$/);
      return true;
    });
    const raw = await call(
      h.gw.url,
      'POST',
      '/v1/chat/completions',
      { model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] },
      { authorization: `Bearer ${poor.key}` },
    );
    assert.equal(raw.status, 402);
    assert.equal(raw.body.error, 'INSUFFICIENT_BALANCE');
    assert.match(raw.body.message, /POST \/v1\/topup/);
    assert.equal(raw.body.balance_usdc, 10);
    assert.ok(raw.body.required_usdc > 10);

    h.fake.behaviour = { failStatus: 503 };
    const w = await h.wallet(1_000_000);
    await assert.rejects(h.client(w.key).chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.InternalServerError);
      assert.equal(err.status, 502);
      assert.equal(err.error, 'UPSTREAM_ERROR');
      return true;
    });
    assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);

    const limited = await startChatHarness('sqlite', { rateLimits: { chat: { perMinute: 1 } } });
    try {
      const lw = await limited.wallet(1_000_000);
      await limited.client(lw.key).chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] });
      await assert.rejects(
        limited.client(lw.key).chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] }),
        (err: unknown) => {
          assert.ok(err instanceof OpenAI.RateLimitError);
          assert.equal(err.error, 'RATE_LIMITED');
          return true;
        },
      );
      await limited.gw.assertLedger();
    } finally {
      await limited.stop();
    }
  });

  test('reasoning and cached tokens are recorded as parts of the totals, not billed on top', async () => {
    const w = await h.wallet(1_000_000);
    h.fake.behaviour = { usage: { ...USAGE, reasoning_tokens: 20, cached_tokens: 30 } };
    const { response } = await h
      .client(w.key)
      .chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'think' }] })
      .withResponse();
    assert.equal(response.headers.get('x-tollgate-charged-usdc'), String(CHARGE));
    const row = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).executeTakeFirstOrThrow();
    assert.deepEqual(
      {
        p: Number(row.prompt_tokens),
        c: Number(row.completion_tokens),
        r: Number(row.reasoning_tokens),
        cached: Number(row.cached_tokens),
        cost: Number(row.provider_cost_usdc),
        est: Number(row.estimated),
        status: row.status,
      },
      { p: 100, c: 50, r: 20, cached: 30, cost: 200, est: 0, status: 'ok' },
    );
    assert.equal(row.model, 'fake/chat-small');
    assert.ok(Number(row.latency_ms) >= 0);
    assert.match(row.request_id, /^[0-9a-f-]{36}$/);
  });

  test('usage reports the per-key totals of real requests', async () => {
    const w = await h.wallet(1_000_000);
    const client = h.client(w.key);
    for (let i = 0; i < 3; i++) await client.chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] });
    const res = await call(h.gw.url, 'GET', `/v1/usage/${w.account.address}`, undefined, { authorization: `Bearer ${w.key}` });
    const k = res.body.keys[0];
    assert.deepEqual(
      { n: k.request_count, p: k.total_prompt_tokens, c: k.total_completion_tokens, charged: k.total_charged_usdc },
      { n: 3, p: 300, c: 150, charged: 3 * CHARGE },
    );
    // Cost is 100×1 + 50×2 = 200 a request, so revenue is 40 micro-USDC a request.
    assert.equal(k.total_platform_revenue_usd, 0.00012);
    assert.equal(res.body.balance_usdc, 1_000_000 - 3 * CHARGE);
  });
});
