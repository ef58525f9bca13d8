import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { ERROR_CASES, MESSAGES, RATE_LIMIT_PER_MINUTE } from '../support/error-cases.ts';
import { FAKE_ANTHROPIC_CONTENT } from '../../src/fake-providers/fake-anthropic-answer.ts';

const FUNDS = 1_000_000;
/** Both providers report the same bill: 100 prompt and 50 output tokens (Anthropic: 70 + 10 written + 20 read). */
const ANTHROPIC_USAGE = { input_tokens: 70, output_tokens: 50, cache_creation_input_tokens: 10, cache_read_input_tokens: 20 };
const OPENAI_USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4
/** Anthropic's 10 cache writes cost 1.25× the prompt price (its default for a model without cache prices). */
const ANTHROPIC_CHARGE = 243; // 90 × 1.2 + 10 × 1.5 + 50 × 2.4
const OPENAI_CONTENT = 'Hello from the fake provider, a stand-in for a paid model.';

/** The two ways a /v1/messages request reaches a provider. */
const UPSTREAMS = [
  { name: 'Anthropic upstream (native)', model: 'anth/claude-test', content: FAKE_ANTHROPIC_CONTENT, charge: ANTHROPIC_CHARGE },
  { name: 'OpenAI-compatible upstream (translated)', model: 'fake/chat-small', content: OPENAI_CONTENT, charge: CHARGE },
] as const;

const WEATHER_TOOL = {
  name: 'get_weather',
  description: 'Weather in a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
};

/**
 * The real @anthropic-ai/sdk against POST /v1/messages: messages.create, messages.stream and
 * create({stream: true}), a tool-use round trip, the request shapes Claude Code sends, and the
 * errors as the SDK raises them; over an Anthropic provider (passed through natively) and an
 * OpenAI-compatible one (translated), billed identically for the same usage.
 */
describe('@anthropic-ai/sdk against /v1/messages', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  beforeEach(() => resetProviders(h, { usage: ANTHROPIC_USAGE }, { usage: OPENAI_USAGE }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  const sdk = (key: string) => new Anthropic({ baseURL: h.gw.url, apiKey: key, maxRetries: 0 });
  const ask = { max_tokens: 300, messages: [{ role: 'user' as const, content: 'hi' }] };

  async function expectCharged(account: any, charge = CHARGE) {
    const balance = await h.balance(account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: FUNDS - charge, locked: 0 });
  }

  for (const up of UPSTREAMS) {
    describe(up.name, () => {
      test('messages.create: the answer as an Anthropic message with usage, billed like chat', async () => {
        const w = await h.wallet(FUNDS);
        const { data: msg, response } = await sdk(w.key)
          .messages.create({ model: up.model, ...ask, system: 'Be brief.' })
          .withResponse();
        assert.equal(msg.type, 'message');
        assert.equal(msg.role, 'assistant');
        assert.deepEqual(msg.content, [{ type: 'text', text: up.content }]);
        assert.equal(msg.stop_reason, 'end_turn');
        assert.equal(msg.usage.output_tokens, 50);
        assert.equal(msg.usage.input_tokens + (msg.usage.cache_creation_input_tokens ?? 0) + (msg.usage.cache_read_input_tokens ?? 0), 100);
        assert.equal(response.headers.get('x-tollgate-charged-usdc'), String(up.charge));
        await expectCharged(w.account, up.charge);
      });

      test('messages.stream: text events and the final message, billed from the stream usage', async () => {
        const w = await h.wallet(FUNDS);
        const stream = sdk(w.key).messages.stream({ model: up.model, ...ask });
        let text = '';
        stream.on('text', (t) => {
          text += t;
        });
        const final = await stream.finalMessage();
        assert.equal(text, up.content);
        assert.deepEqual(final.content, [{ type: 'text', text: up.content }]);
        assert.equal(final.stop_reason, 'end_turn');
        assert.equal(final.usage.output_tokens, 50);
        await expectCharged(w.account, up.charge);
      });

      test('create({stream: true}): message_start, content blocks, message_delta with usage, message_stop', async () => {
        const w = await h.wallet(FUNDS);
        const events = await sdk(w.key).messages.create({ model: up.model, ...ask, stream: true });
        const types: string[] = [];
        let delta: any;
        for await (const e of events) {
          if (types.at(-1) !== e.type) types.push(e.type);
          if (e.type === 'message_delta') delta = e;
        }
        assert.deepEqual(
          types.filter((t) => t !== 'ping'),
          ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
        );
        assert.equal(delta.delta.stop_reason, 'end_turn');
        assert.equal(delta.usage.output_tokens, 50);
        await expectCharged(w.account, up.charge);
      });

      test('tool use round trip: tool_use with its input, then the tool_result goes back to the provider', async () => {
        const w = await h.wallet(FUNDS);
        h.anthropic.behaviour = { usage: ANTHROPIC_USAGE, toolCalls: [{ name: 'get_weather', input: { city: 'Paris' } }] };
        h.fake.behaviour = { usage: OPENAI_USAGE, toolCall: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
        const client = sdk(w.key);
        const first = await client.messages.stream({ model: up.model, ...ask, tools: [WEATHER_TOOL] }).finalMessage();
        assert.equal(first.stop_reason, 'tool_use');
        const use = first.content.find((b) => b.type === 'tool_use');
        assert.ok(use && use.type === 'tool_use');
        assert.deepEqual([use.name, use.input], ['get_weather', { city: 'Paris' }]);

        h.anthropic.behaviour = { usage: ANTHROPIC_USAGE };
        h.fake.behaviour = { usage: OPENAI_USAGE };
        const second = await client.messages.create({
          model: up.model,
          max_tokens: 300,
          tools: [WEATHER_TOOL],
          messages: [
            ...ask.messages,
            { role: 'assistant', content: first.content },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18°C, sunny' }] },
          ],
        });
        assert.equal(second.stop_reason, 'end_turn');
        if (up.model.startsWith('anth/')) {
          const sent = h.anthropic.received.at(-1)!.body;
          assert.deepEqual(sent.messages.at(-1), { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18°C, sunny' }] });
        } else {
          const sent = h.fake.received.at(-1)!.body;
          assert.deepEqual(sent.messages.at(-1), { role: 'tool', tool_call_id: use.id, content: '18°C, sunny' });
          assert.equal(sent.messages.at(-2).tool_calls[0].function.arguments, '{"city":"Paris"}');
          assert.deepEqual(sent.tools, [
            { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: WEATHER_TOOL.input_schema } },
          ]);
        }
        await expectCharged(w.account, 2 * up.charge);
      });

      test('the same conversation bills the same through /v1/chat/completions and /v1/messages', async () => {
        const viaChat = await h.wallet(FUNDS);
        const viaMessages = await h.wallet(FUNDS);
        await h.client(viaChat.key).chat.completions.create({
          model: up.model,
          max_tokens: 300,
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'user', content: 'hi' },
          ],
        });
        await sdk(viaMessages.key).messages.create({ model: up.model, ...ask, system: 'Be brief.' });
        const charged = async (keyId: number) =>
          (
            await h.gw.services.storage.db
              .selectFrom('request_usage')
              .select(['charged_usdc', 'prompt_tokens', 'completion_tokens'])
              .where('api_key_id', '=', keyId)
              .execute()
          ).map((r) => [Number(r.charged_usdc), Number(r.prompt_tokens), Number(r.completion_tokens)]);
        assert.deepEqual(await charged(viaMessages.keyId), await charged(viaChat.keyId));
        assert.deepEqual(await charged(viaMessages.keyId), [[up.charge, 100, 50]]);
      });

      test('the key as Authorization: Bearer (ANTHROPIC_AUTH_TOKEN) works as well as x-api-key', async () => {
        const w = await h.wallet(FUNDS);
        const msg = await new Anthropic({ baseURL: h.gw.url, authToken: w.key, apiKey: null, maxRetries: 0 }).messages.create({ model: up.model, ...ask });
        assert.equal(msg.content[0]!.type, 'text');
        await expectCharged(w.account, up.charge);
      });
    });
  }

  test("Claude Code's request shape reaches an Anthropic provider untranslated: system blocks with cache_control, tools, thinking, metadata", async () => {
    const w = await h.wallet(FUNDS);
    h.anthropic.behaviour = { usage: ANTHROPIC_USAGE, reasoning: 'Let me think.' };
    const request = {
      model: 'anth/claude-test',
      max_tokens: 4000,
      system: [{ type: 'text' as const, text: 'You are Claude Code.', cache_control: { type: 'ephemeral' as const } }],
      messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'fix the bug', cache_control: { type: 'ephemeral' as const } }] }],
      tools: [{ ...WEATHER_TOOL, cache_control: { type: 'ephemeral' as const } }],
      thinking: { type: 'enabled' as const, budget_tokens: 1024 },
      metadata: { user_id: 'user_abc' },
      temperature: 1,
    };
    const final = await sdk(w.key).messages.stream(request).finalMessage();
    assert.deepEqual(
      final.content.map((b) => b.type),
      ['thinking', 'text'],
    );
    const sent = h.anthropic.received[0]!.body;
    const { model, ...rest } = sent;
    assert.equal(model, 'claude-upstream');
    assert.deepEqual(rest, { ...withoutModel(request), stream: true });
    await expectCharged(w.account, ANTHROPIC_CHARGE);
  });

  test("Claude Code's request shape to an OpenAI-compatible provider: cache_control and signed thinking dropped, thinking forwarded for a thinking model", async () => {
    const w = await h.wallet(FUNDS);
    await sdk(w.key).messages.create({
      model: 'fake/thinker',
      max_tokens: 4000,
      system: [{ type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'fix the bug', cache_control: { type: 'ephemeral' } }] }],
      thinking: { type: 'enabled', budget_tokens: 1024 },
      metadata: { user_id: 'user_abc' },
    });
    const sent = h.fake.received[0]!.body;
    assert.deepEqual(sent.messages, [
      { role: 'system', content: 'You are Claude Code.' },
      { role: 'user', content: [{ type: 'text', text: 'fix the bug' }] },
    ]);
    assert.deepEqual(sent.thinking, { type: 'enabled', budget_tokens: 1024 });
    assert.equal(sent.user, 'user_abc');
    assert.equal(sent.max_tokens, 4000);
  });
});

function withoutModel<T extends { model: string }>(r: T): Omit<T, 'model'> {
  const { model: _model, ...rest } = r;
  return rest;
}

/** The SDK's class for each status, and the Anthropic error type the body carries. */
const CLASS_BY_STATUS = {
  400: Anthropic.BadRequestError,
  401: Anthropic.AuthenticationError,
  402: Anthropic.APIError,
  429: Anthropic.RateLimitError,
  502: Anthropic.InternalServerError,
};
const TYPE_BY_STATUS = { 400: 'invalid_request_error', 401: 'authentication_error', 402: 'billing_error', 429: 'rate_limit_error', 502: 'api_error' };

describe("@anthropic-ai/sdk renders the gateway's errors (Anthropic's error shape on /v1/messages)", () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { rateLimits: { chat: { perMinute: RATE_LIMIT_PER_MINUTE } } });
  });
  beforeEach(() => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const c of ERROR_CASES) {
    test(`${c.status} ${c.code}`, async () => {
      const { key, model } = await c.prepare(h);
      const err = await new Anthropic({ baseURL: h.gw.url, apiKey: key, maxRetries: 0 }).messages
        .create({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
        .then(
          () => assert.fail('the call succeeded'),
          (e: unknown) => e,
        );
      assert.ok(err instanceof CLASS_BY_STATUS[c.status], String(err));
      assert.equal(err.status, c.status);
      const body = err.error as { type: string; error: Record<string, unknown> };
      assert.equal(body.type, 'error');
      assert.equal(body.error.type, TYPE_BY_STATUS[c.status]);
      assert.equal(body.error.code, c.code);
      assert.match(String(body.error.message), MESSAGES[c.status]);
      if (c.status === 402) assert.equal(body.error.balance_usdc, 10);
    });
  }

  test('a request without max_tokens is a 400 naming it, as Anthropic answers', async () => {
    const { key } = await h.wallet(FUNDS);
    const res = await fetch(`${h.gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.equal(body.type, 'error');
    assert.equal(body.error.type, 'invalid_request_error');
    assert.equal(body.error.param, 'max_tokens');
    assert.match(body.error.message, /max_tokens: Field required/);
  });
});
