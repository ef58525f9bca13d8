import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { planInbound } from '../../src/metered/plan/inbound.ts';
import { parseConfig } from '../../src/config/load.ts';
import { anthropicMessagesInbound } from '../../src/protocols/anthropic-messages/inbound.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';
import { ApiError } from '../../src/refusal.ts';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { watchTurns } from '../support/loop-hold.ts';
import { until } from '../support/until.ts';

/**
 * Attacks on what POST /v1/messages accepts from Claude Code (field and beta policy,
 * mid-conversation system messages, count_tokens, retry headers, the balance fit). Each test
 * states the defence it asks for.
 */

const NATIVE = 'anth/claude-test';
const HI = [{ role: 'user', content: 'hi' }];
const ONE_HOUR = { type: 'ephemeral', ttl: '1h' };
/** Each call reports 10 input and 10 output tokens: 12 + 24 = 36 micro-USDC on these models. */
const USAGE = { input_tokens: 10, output_tokens: 10 };

const config = parseConfig(
  {
    providers: { anth: { type: 'anthropic' } },
    models: [
      {
        provider: 'anth',
        name: 'claude',
        contextLength: 200_000,
        maxOutputTokens: 8000,
        promptCostPer1M: '1',
        completionCostPer1M: '1',
        cacheWriteCostPer1M: '1.25',
        cacheReadCostPer1M: '0.1',
      },
    ],
  },
  {},
);
const catalog = buildCatalog(config);
const plan = (body: unknown) => planInbound(anthropicMessagesInbound, body, catalog, config, {});

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  assert.fail('the request was accepted and would be forwarded to Anthropic as sent');
}

/** A search result (Anthropic's SearchResultBlockParam) whose text block asks for a one-hour cache write. */
const SEARCH_RESULT_1H = {
  type: 'search_result',
  source: 'https://example.com',
  title: 't',
  content: [{ type: 'text', text: 'x'.repeat(5000), cache_control: ONE_HOUR }],
};

async function post(url: string, key: string | null, body: unknown, headers: Record<string, string> = {}, path = '/v1/messages') {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}), ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: async () => JSON.parse(text) };
}

describe('attack: native /v1/messages fields the policy does not see', () => {
  test('attack: a one-hour cache write nested in a search_result block is refused like any other ttl "1h"', () => {
    const err = refusal(() => plan({ model: 'anth/claude', max_tokens: 10, messages: [{ role: 'user', content: [SEARCH_RESULT_1H] }] }));
    assert.equal(err.status, 400);
    assert.match(String(err.extra.param), /cache_control/);
  });

  test('attack: a one-hour cache write in a search_result inside a tool_result is refused too', () => {
    const err = refusal(() =>
      plan({
        model: 'anth/claude',
        max_tokens: 10,
        messages: [
          { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'search', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [SEARCH_RESULT_1H] }] },
        ],
      }),
    );
    assert.equal(err.status, 400);
    assert.match(String(err.extra.param), /cache_control/);
  });

  test('attack: message-level fields other than role, content and output_config are not forwarded unchecked', () => {
    // Top-level fields are allowlisted; the keys of each message are not: these reach Anthropic as sent.
    for (const extra of [{ cache_control: ONE_HOUR }, { speed: 'fast' }, { inference_geo: 'us' }, { service_tier: 'priority' }]) {
      const err = refusal(() => plan({ model: 'anth/claude', max_tokens: 10, messages: [{ role: 'system', content: 'env', ...extra }, ...HI] }));
      assert.equal(err.status, 400, JSON.stringify(extra));
    }
  });

  test('attack: a thinking type other than enabled, adaptive or disabled is refused, not forwarded', () => {
    // thinkingFor checks budget_tokens only when type is "enabled"; any other type passes with any budget.
    const err = refusal(() => plan({ model: 'anth/claude', max_tokens: 8000, thinking: { type: 'enabled_extended', budget_tokens: 100_000 }, messages: HI }));
    assert.equal(err.status, 400);
    assert.match(String(err.extra.param), /^thinking/);
  });
});

for (const engine of ENGINES) {
  describe(`attack: a one-hour cache write smuggled to Anthropic (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(engine, { models: [...MODELS, CLAUDE] });
    });
    beforeEach(() => resetProviders(h, { usage: USAGE }, { usage: { prompt_tokens: 10, completion_tokens: 10 } }));
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    test('attack: cache_control ttl "1h" inside a search_result never reaches the provider (billed there at 2x input, here at the 5-minute rate)', async () => {
      const w = await h.wallet(1_000_000);
      for (const content of [[SEARCH_RESULT_1H], [{ type: 'tool_result', tool_use_id: 't1', content: [SEARCH_RESULT_1H] }]]) {
        const messages =
          content[0]!.type === 'tool_result'
            ? [
                { role: 'user', content: 'search' },
                { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'search', input: {} }] },
                { role: 'user', content },
              ]
            : [{ role: 'user', content }];
        const res = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 10, messages });
        assert.equal(res.status, 400, res.text);
      }
      assert.equal(h.anthropic.received.length, 0, `forwarded: ${JSON.stringify(h.anthropic.received[0]?.body.messages)}`);
      assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
    });

    test('attack: a message-level cache_control ttl "1h" never reaches the provider', async () => {
      const w = await h.wallet(1_000_000);
      const res = await post(h.gw.url, w.key, {
        model: NATIVE,
        max_tokens: 10,
        messages: [{ role: 'user', content: 'x'.repeat(5000), cache_control: ONE_HOUR }],
      });
      assert.equal(res.status, 400, res.text);
      assert.equal(h.anthropic.received.length, 0, `forwarded: ${JSON.stringify(h.anthropic.received[0]?.body.messages?.[0]?.cache_control)}`);
    });
  });
}

describe('attack: count_tokens and retry headers (sqlite)', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE] });
  });
  beforeEach(() => resetProviders(h, { usage: USAGE }, { usage: { prompt_tokens: 10, completion_tokens: 10 } }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test("attack: one count_tokens call with a long run of letters does not stall the gateway (o200k BPE is quadratic in a word's length)", async () => {
    // A key with an empty wallet is enough: count_tokens is never reserved or billed. 96 KiB of one
    // "word" is ~9 s of synchronous tokenizer time here (64 KiB: 4 s, 256 KiB: 55 s; 4 MiB, the body
    // limit, would be hours), during which every other request on the instance waits.
    const w = await h.wallet(0);
    // The tokenizer is loaded by the first count (asynchronously); load it first.
    assert.equal((await post(h.gw.url, w.key, { model: NATIVE, messages: HI }, {}, '/v1/messages/count_tokens')).status, 200);
    // The gateway runs in this test's process, so its event loop is this one: a turn that holds it for
    // seconds is the time every request on the instance (health checks, streams, settles) waited. The
    // turn is measured in CPU time: on a loaded machine the scheduler alone stretches wall time.
    const turns = watchTurns();
    const longWord = { model: NATIVE, messages: [{ role: 'user', content: 'a'.repeat(96 * 1024) }] };
    const counted = await post(h.gw.url, w.key, longWord, {}, '/v1/messages/count_tokens');
    const longest = turns.stop();
    assert.equal(counted.status, 200, counted.text);
    assert.ok(longest < 1000, `one turn of the event loop took ${Math.round(longest)} ms of CPU on one count_tokens call of 96 KiB`);
  });

  test("attack: a 402 caused only by funds locked by the wallet's own request in flight is not marked x-should-retry: false", async () => {
    // Claude Code runs requests side by side; the second is refused while the first holds its
    // reservation, and the very same request succeeds once the first settles (a moment later).
    const w = await h.wallet(4000);
    // The first answer is held long enough for the second request to be refused even on a loaded machine.
    h.anthropic.behaviour = { usage: USAGE, delayMs: 3000 };
    const calls = h.anthropic.received.length;
    const first = post(h.gw.url, w.key, { model: NATIVE, max_tokens: 1000, messages: HI });
    // The provider has the first request: its reservation is held.
    await until(() => h.anthropic.received.length === calls + 1, 'the first request reached the provider');
    const second = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 1000, messages: HI });
    assert.equal((await first).status, 200);
    assert.equal(second.status, 402);
    h.anthropic.behaviour = { usage: USAGE };
    const retried = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 1000, messages: HI });
    assert.equal(retried.status, 200, 'the same request succeeds once the other settles');
    assert.notEqual(second.headers.get('x-should-retry'), 'false', 'a transient 402 tells the SDK never to retry');
  });

  test("attack: a provider's own 400 (the same request will be refused again) is not relayed as a retryable 502", async () => {
    // Claude Code retries 5xx without x-should-retry: false (10 times, minutes): each retry a new provider call.
    const w = await h.wallet(1_000_000);
    h.anthropic.behaviour = { failStatus: 400 };
    const res = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 10, messages: HI });
    assert.equal(h.anthropic.received.length, 1);
    assert.ok(res.status === 400 || res.headers.get('x-should-retry') === 'false', `status ${res.status}, x-should-retry ${res.headers.get('x-should-retry')}`);
  });
});
